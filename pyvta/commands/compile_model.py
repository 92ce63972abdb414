"""pyvta compile: compile an ONNX model for a target and write an artifact pyvta run loads."""

from __future__ import annotations

import argparse

from pyvta.commands.network import TARGETS, compile_for

HELP = "compile MODEL.onnx for a target into an artifact (.npz) that pyvta run loads"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX file")
    p.add_argument("--target", choices=list(TARGETS), default="vta-sim")
    p.add_argument("-o", "--out", required=True, metavar="ARTIFACT.npz")
    p.add_argument("--tuning-log", dest="tuning_log", help="cpu: tuned layer schedules (LOG.jsonl)")


def run(args: argparse.Namespace) -> int:
    cm = compile_for(args.model, args.target, tuning_log=args.tuning_log)
    path = cm.save(args.out)
    n_vta = sum(1 for n in cm.graph.nodes if n.target == "vta")
    print(f"wrote {path}: {len(cm.graph.nodes)} nodes ({n_vta} on the accelerator)")
    return 0
