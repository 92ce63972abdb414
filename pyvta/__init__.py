"""pyvta"""
