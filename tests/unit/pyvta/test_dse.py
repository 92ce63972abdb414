"""pyvta dse: the Pareto front, the per-config cache (a sweep resumes; a failed stage is retried),
the table and plot, and (slow) a real cycles-only run on a shipped config."""

from pathlib import Path

import pytest

from pyvta import dse, isa

CONFIG_DIR = Path(__file__).resolve().parents[3] / "bitstreams" / "configs"
SMALL = isa.HwConfig.load(CONFIG_DIR / "small.json")


def test_pareto_front():
    pts = [(10, 5.0), (20, 2.0), (15, 6.0), (30, 2.0), (5, 9.0)]
    assert dse.pareto(pts) == [0, 1, 4]


def test_sweep_resumes_from_the_cache_and_retries_failures(tmp_path):
    calls = {"timing": 0, "resnet18": 0}
    fail = {"resnet18": True}

    def timing(cfg):
        calls["timing"] += 1
        return {
            "resources": {"lut": 100.0, "ff": 50.0, "bram36": 4.0, "dsp": 8.0},
            "share": {"xczu7ev": {"lut": 0.1, "ff": 0.1, "bram36": 0.2, "dsp": 0.3}},
            "fits": {"xc7z020": True, "xczu3eg": True, "xczu7ev": True},
            "cell_delay_ns": 6.0,
            "logic_levels": 12,
            "timing_sources": "fake",
        }

    def resnet18(cfg):
        calls["resnet18"] += 1
        if fail["resnet18"]:
            raise RuntimeError("simulated crash")
        return {"resnet18_cycles": 7_000_000}

    def explorer():
        stages = {"timing": timing, "resnet18": resnet18}
        sources = {"timing": lambda cfg: "fake"}
        return dse.Explorer(tmp_path, stages=stages, sources=sources, log=lambda _: None)

    (p,) = explorer().explore({"small": SMALL})
    assert p.cell_delay_ns == 6.0 and p.resnet18_cycles is None and "simulated crash" in p.notes[0]
    assert p.clock_mhz == pytest.approx(100.0) and p.latency_ms is None
    fail["resnet18"] = False
    (p,) = explorer().explore({"small": SMALL})
    assert calls == {"timing": 1, "resnet18": 2}  # timing from the cache, the failure retried
    assert p.latency_ms == pytest.approx(70.0) and not p.notes
    (p,) = explorer().explore({"small": SMALL})
    assert calls == {"timing": 1, "resnet18": 2}
    cycles_only = dse.Explorer(
        tmp_path, synth=False, stages={"resnet18": resnet18}, sources={"timing": lambda c: "fake"}
    )
    (q,) = cycles_only.explore({"small": SMALL})  # earlier stages still read from the cache
    assert q.cell_delay_ns == 6.0 and q.latency_ms == p.latency_ms and not q.notes
    text = dse.table([p, dse.DsePoint("other", "t")])
    assert "| small | 1x8_" in text and "| 7.00 | 70.00 |" in text and "| other | t | - |" in text
    png = dse.plot([p], tmp_path / "dse.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_timing_is_redone_when_its_hw_sources_change(tmp_path):
    sources = {"now": "aaaa"}
    calls = []

    def timing(cfg):
        calls.append(sources["now"])
        return {"cell_delay_ns": 5.0, "timing_sources": sources["now"]}

    def explorer(**kw):
        kw.setdefault("sources", {"timing": lambda cfg: sources["now"]})
        return dse.Explorer(tmp_path, stages={"timing": timing}, log=lambda _: None, **kw)

    (p,) = explorer().explore({"small": SMALL})
    (p,) = explorer().explore({"small": SMALL})
    assert calls == ["aaaa"] and not p.notes  # cached: same sources
    sources["now"] = "bbbb"
    (p,) = explorer().explore({"small": SMALL})
    assert calls == ["aaaa", "bbbb"] and p.timing_sources == "bbbb" and not p.notes
    sources["now"] = "cccc"  # kept, with a note, where no stage asks for current sources
    (p,) = explorer(sources={}).explore({"small": SMALL})
    assert calls == ["aaaa", "bbbb"] and "hw sources bbbb, not the current" in p.notes[0]


def test_table_names_the_resources_that_keep_a_config_off_a_board():
    small = {"lut": 0.2, "ff": 0.1, "bram36": 0.5, "dsp": 0.3}
    big = {"lut": 0.46, "ff": 0.06, "bram36": 1.128, "dsp": 1.5}
    share = {"xc7z020": big, "xczu3eg": small, "xczu7ev": small | {"bram36": 1.128}}
    fits = {board: all(v <= 1 for v in s.values()) for board, s in share.items()}
    p = dse.DsePoint("big", "t", share=share, fits=fits)
    fitting = dse.DsePoint("ok", "t", share={"xczu7ev": small}, fits=dict.fromkeys(fits, True))
    assert dse.overuse(p) == (
        "over xc7z020: BRAM36 113%, DSP 150%; xczu7ev: BRAM36 113%"
        " (block RAM only: URAM not counted)"
    )
    assert dse.overuse(fitting) is None and dse.overuse(dse.DsePoint("none", "t")) is None
    assert "- big: over xc7z020: BRAM36 113%" in dse.table([p, fitting])


def test_cycles_only_run_on_the_small_config(tmp_path, capsys):
    from pyvta.cli import main

    config = str(CONFIG_DIR / "small.json")
    args = ["dse", "--configs", config, "--no-synth", "--size", "32", "--cache-dir", str(tmp_path)]
    assert main([*args, "--json", str(tmp_path / "p.json")]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| small")]
    assert row.startswith("| small | 1x8_i8w8a32_15_14_16_16 | - |")
    cycles_m, latency = row.split("|")[-3:-1]  # no synthesis: cycles but no clock, no latency
    assert float(cycles_m) > 0 and latency.strip() == "-"
    assert '"resnet18_cycles"' in (tmp_path / "p.json").read_text()


def test_unknown_board_is_an_error(capsys):
    from pyvta.cli import main

    assert main(["dse", "--configs", str(CONFIG_DIR / "small.json"), "--board", "xc7z010"]) == 2
    assert "allowed: xc7z020, xczu3eg, xczu7ev" in capsys.readouterr().err


def test_resnet18_cycles_are_redone_when_the_compiler_changes(tmp_path, monkeypatch):
    """The default explorer keys the ResNet-18 stage by ``resnet18_sources`` (compiler, sim, ISA
    sources and the tuned log): a cached figure from other sources is measured again."""
    now = {"key": "c1"}
    calls = []

    def resnet18(cfg, size):
        calls.append(now["key"])
        return {"resnet18_cycles": 1, "resnet18_schedules": "x", "resnet18_sources": now["key"]}

    monkeypatch.setattr(dse, "measure_resnet18", resnet18)
    monkeypatch.setattr(dse, "resnet18_sources", lambda cfg, size: now["key"])
    for _ in range(2):
        (p,) = dse.Explorer(tmp_path, synth=False, log=lambda _: None).explore({"s": SMALL})
    assert calls == ["c1"]
    now["key"] = "c2"
    (p,) = dse.Explorer(tmp_path, synth=False, log=lambda _: None).explore({"s": SMALL})
    assert calls == ["c1", "c2"] and p.resnet18_sources == "c2"


def test_tuned_log_only_for_the_config_it_was_tuned_for():
    log = dse._tuned_log(isa.DEFAULT_CONFIG, 224)
    assert log is not None and log.name == "resnet18_224_vta-sim.jsonl"
    assert dse._tuned_log(SMALL, 224) is None and dse._tuned_log(isa.DEFAULT_CONFIG, 32) is None
    a = dse.resnet18_sources(SMALL, 224)
    assert a == dse.resnet18_sources(SMALL, 224) != dse.resnet18_sources(isa.DEFAULT_CONFIG, 224)
