import json

import pytest

from pyvta.isa import ConfigError, HwConfig


def test_default_config_sizes():
    cfg = HwConfig()
    assert cfg.tag == "1x16_i8w8a32_15_15_18_17"
    assert (cfg.batch, cfg.block_in, cfg.block_out) == (1, 16, 16)
    assert (cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.acc_elem_bytes, cfg.out_elem_bytes) == (
        16,
        256,
        64,
        16,
    )
    assert (cfg.uop_depth, cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth) == (8192, 2048, 1024, 2048)
    assert (cfg.log_uop_depth, cfg.log_inp_depth, cfg.log_wgt_depth, cfg.log_acc_depth) == (
        13,
        11,
        10,
        11,
    )
    assert cfg.out_buff_bytes == 1 << 15  # LOG_OUT_BUFF_SIZE = 15
    assert cfg.gemm_macs_per_cycle == 256
    assert cfg.bus_width_bits == 64


def test_load_vta_config_json(tmp_path):
    vta = {
        "TARGET": "pynq",
        "HW_VER": "0.0.2",
        "LOG_INP_WIDTH": 3,
        "LOG_WGT_WIDTH": 3,
        "LOG_ACC_WIDTH": 5,
        "LOG_BATCH": 0,
        "LOG_BLOCK": 4,
        "LOG_UOP_BUFF_SIZE": 15,
        "LOG_INP_BUFF_SIZE": 15,
        "LOG_WGT_BUFF_SIZE": 18,
        "LOG_ACC_BUFF_SIZE": 17,
    }
    path = tmp_path / "vta_config.json"
    path.write_text(json.dumps(vta))
    cfg = HwConfig.load(path)
    assert cfg.TARGET == "pynq"
    assert cfg.tag == "1x16_i8w8a32_15_15_18_17"
    assert HwConfig.from_json(cfg.to_json()) == cfg


def test_other_config_tag():
    cfg = HwConfig(LOG_BATCH=1, LOG_BLOCK=3, LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16)
    assert cfg.tag == "2x8_i8w8a32_15_15_16_16"
    assert cfg.acc_depth == (1 << 16) // (2 * 8 * 4)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"LOG_INP_WIDTH": 2},
            "LOG_INP_WIDTH = 2 is out of range (allowed: 3); pyvta supports int8",
        ),
        ({"LOG_BLOCK": 9}, "LOG_BLOCK = 9 is out of range (allowed: 1..6)"),
        ({"LOG_BATCH": "0"}, "LOG_BATCH must be an int"),
        ({"LOG_ACC_BUFF_SIZE": 20}, "GemmInsn fields of word 1 need 70 bits, more than the 64-bit"),
        ({"HW_VER": "0.0.1"}, "HW_VER '0.0.1' is not supported"),
        ({"LOG_WGT_BUFF_SIZE": 7}, "smaller than one wgt element (256 bytes)"),
    ],
)
def test_invalid_configs_raise_clear_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        HwConfig(**kwargs)


def test_unknown_key_names_allowed_keys():
    with pytest.raises(ConfigError, match="unknown config keys \\['LOG_FOO'\\]; allowed keys"):
        HwConfig.from_dict({"LOG_FOO": 1})


def test_bad_json():
    with pytest.raises(ConfigError, match="not valid JSON"):
        HwConfig.from_json("{")
