#!/usr/bin/env python3
"""Writes the seed corpus of the fuzzers, tests/fuzz/corpus/<target>/.

The seeds are small valid files and near-valid ones (one thing wrong), so
that each fuzzer starts inside the format rather than at random bytes. The
output is committed; rerun this only to change the seeds (it rewrites the
files it makes and leaves other files, such as regression inputs, alone).
Formats follow the readers' headers: host/data/idx_reader.hpp,
host/data/csv_reader.hpp, host/checkpoint/safetensors.hpp (the writer's
layout: sorted JSON keys, spaces to 8 bytes, crc32.<tensor> metadata),
host/quant/calibration_file.hpp, host/plugin/elf_check.hpp.
"""
import gzip
import json
import pathlib
import struct
import zlib

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
EXAMPLES = HERE.parent.parent / "examples"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data.encode() if isinstance(data, str) else data)


# --- model files: the examples, with and without --set lines --------------
TINY_MODEL = """[model]
name = "tiny"
input = [4]
classes = 3

[[layers]]
name = "fc1"
op = "linear"
out_features = 8
activation = "relu"

[[layers]]
name = "fc2"
op = "linear"
out_features = 3

[train]
optimizer = "adamw"
lr = 0.001
batch_size = 16
steps = 10

[data]
format = "synthetic"
synthetic_samples = 64
"""


def model_corpus():
    for example in sorted(EXAMPLES.glob("*.toml")):
        put("model", example.name, example.read_bytes())
    put("model", "tiny.toml", TINY_MODEL)
    put("model", "tiny_set.toml",
        "--set train.lr=0.5\n--set layers.fc1.out_features=[2, 3]\n--set data.format=csv\n" + TINY_MODEL)
    put("model", "tiny_set_unknown_layer.toml", "--set layers.nope.out_features=1\n" + TINY_MODEL)
    put("model", "tiny_features.toml", TINY_MODEL + '\n[features.amp]\ndtype = "bf16"\ninitial_scale = 65536\n')
    put("model", "syntax_error.toml", TINY_MODEL.replace("out_features = 3", "out_features = = 3"))
    put("model", "unknown_key.toml", TINY_MODEL.replace("activation", "activaton"))


# --- IDX -------------------------------------------------------------------
def idx(type_byte, fmt, dims, values):
    head = bytes([0, 0, type_byte, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return head + b"".join(struct.pack(">" + fmt, v) for v in values)


def idx_corpus():
    images = idx(0x08, "B", [2, 3, 3], range(18))
    put("idx", "images_u8.idx", images)
    put("idx", "images_u8.idx.gz", gzip.compress(images, mtime=0))
    put("idx", "labels_u8.idx", idx(0x08, "B", [4], [0, 1, 2, 9]))
    put("idx", "s8.idx", idx(0x09, "b", [3], [-128, 0, 127]))
    put("idx", "s16.idx", idx(0x0B, "h", [2, 2], [-32768, -1, 1, 32767]))
    put("idx", "s32.idx", idx(0x0C, "i", [2], [-(2**31), 2**31 - 1]))
    put("idx", "f32.idx", idx(0x0D, "f", [2, 2], [0.5, -1.0, 3.25, 1e30]))
    put("idx", "f64.idx", idx(0x0E, "d", [3], [1e-300, -2.5, 1e300]))
    put("idx", "truncated.idx", images[:-5])
    put("idx", "bad_type.idx", bytes([0, 0, 0x0A, 1, 0, 0, 0, 1, 7]))


# --- CSV: first byte = options (see csv_fuzzer.cpp) --------------------------
def csv_option(header=False, delimiter=",", label=0):
    return bytes([int(header) | (",;\t ".index(delimiter) << 1) | ((label & 31) << 3)])


def csv_corpus():
    rows = "0,1.5,2\n1,0.5,-3\n2,1e-3,4\n"
    put("csv", "plain.csv", csv_option() + rows.encode())
    put("csv", "header.csv", csv_option(header=True) + b"label,a,b\n" + rows.encode())
    put("csv", "semicolon_last_label.csv", csv_option(delimiter=";", label=-1) + b"1.5;2;0\r\n0.5;-3;1\r\n")
    put("csv", "tab_spaces.csv", csv_option(delimiter="\t", label=1) + b" 1.5\t 2 \t3\n\n4\t0\t5\n")
    put("csv", "ragged.csv", csv_option() + b"0,1,2\n1,2\n")
    put("csv", "nan_cell.csv", csv_option() + b"0,nan,2\n")
    put("csv", "fractional_label.csv", csv_option() + b"2.5,1,2\n")
    put("csv", "big_label.csv", csv_option() + b"2147483646,1,2\n")


# --- safetensors -------------------------------------------------------------
def safetensors(tensors, metadata=None, crc=True, corrupt=None):
    """tensors: [(name, dtype, shape, bytes)]; the writer's layout."""
    header, meta, offset, blobs = {}, dict(metadata or {}), 0, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"data_offsets": [offset, offset + len(data)], "dtype": dtype, "shape": shape}
        if crc:
            meta["crc32." + name] = "%08x" % zlib.crc32(data)
        offset += len(data)
        blobs += data
    header["__metadata__"] = meta
    text = json.dumps(header, sort_keys=True, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    blob = struct.pack("<Q", len(text)) + text.encode() + blobs
    if corrupt is not None:
        blob = blob[:corrupt] + bytes([blob[corrupt] ^ 0x7F]) + blob[corrupt + 1:]
    return blob


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def safetensors_corpus():
    two = [("fc1.weight", "F32", [3, 4], f32(*range(12))), ("fc1.bias", "F32", [3], f32(-1, 0, 1))]
    put("safetensors", "two_tensors.safetensors", safetensors(two, {"tandem.step": "42"}))
    put("safetensors", "no_crc.safetensors", safetensors(two, crc=False))
    whole = safetensors(two, {"tandem.step": "42"})
    put("safetensors", "bad_crc.safetensors", safetensors(two, {"tandem.step": "42"}, corrupt=len(whole) - 2))
    put("safetensors", "truncated.safetensors", whole[:-10])
    put("safetensors", "dtypes.safetensors", safetensors([
        ("f64", "F64", [1], struct.pack("<d", 2.5)),
        ("f16", "F16", [2], b"\x00\x3c\x00\xc0"),
        ("bf16", "BF16", [2], b"\x80\x3f\x00\x40"),
        ("i8", "I8", [2], b"\x80\x7f"),
        ("u8", "U8", [2, 1], b"\x00\xff"),
        ("i32", "I32", [1], struct.pack("<i", -7)),
        ("i64", "I64", [], struct.pack("<q", 1 << 40)),
        ("empty", "F32", [0, 5], b""),
    ]))
    put("safetensors", "empty_header.safetensors", struct.pack("<Q", 8) + b"{}      ")
    put("safetensors", "int8_model.safetensors", safetensors(
        [("fc1.weight", "I8", [2, 2], b"\x01\xff\x7f\x80"), ("fc1.weight_scale", "F32", [2], f32(0.5, 0.25))],
        {"tandem.quantized": "int8", "tandem.calibration": "calibration.json"}))


# --- calibration.json --------------------------------------------------------
def calibration(**changes):
    c = {
        "format": "tandem-int8-calibration", "version": 1,
        "model": "examples/fmnist_mlp.toml", "checkpoint": "model-int8.safetensors",
        "calibrator": "percentile", "percentile": 99.99, "samples": 512, "per_channel": True,
        "weight_qmax": 63, "weight_range": "7-bit weights",
        "layers": {
            "fc1": {"op": "linear",
                    "input": {"dtype": "u8", "scale": 0.0123, "zero_point": 54,
                              "observed": [-0.66, 2.5], "clipped": [-0.66, 2.47]},
                    "weight": {"dtype": "s8", "axis": 0, "scales": [0.01, 0.02, 0.015], "zero_point": 0}},
            "fc2": {"op": "linear",
                    "input": {"dtype": "u8", "scale": 0.05, "zero_point": 0},
                    "weight": {"dtype": "s8", "axis": 0, "scales": [0.1], "zero_point": 0}},
        },
    }
    c.update(changes)
    return json.dumps(c, indent=2) + "\n"


def calibration_corpus():
    put("calibration", "percentile.json", calibration())
    put("calibration", "entropy_minimal.json", json.dumps({
        "format": "tandem-int8-calibration", "version": 1, "calibrator": "entropy",
        "layers": {"fc": {"input": {"scale": 1.0, "zero_point": 128}, "weight": {"scales": [1.0]}}}}))
    put("calibration", "version2.json", calibration(version=2))
    put("calibration", "bad_qmax.json", calibration(weight_qmax=200))
    put("calibration", "no_layers.json", calibration(layers={}))
    put("calibration", "not_calibration.json", '{"format": "something-else"}')


# --- ELF: a minimal 64-bit shared library header for this machine -----------
EHDR, PHDR, SHDR = "<16sHHIQQQIHHHHHH", "<IIQQQQQQ", "<IIQQQQIIQQ"
PT_LOAD, PT_DYNAMIC, PT_GNU_STACK = 1, 2, 0x6474E551


def elf(e_type=3, machine=62, elf_class=2, segments=None, sections=0, size=0x200):
    """An ELF header, its program headers right after it, `sections` section
    headers at the end, padded to `size` bytes."""
    if segments is None:
        segments = [(PT_LOAD, 0, 0x200, 0x200), (PT_DYNAMIC, 0x180, 0x40, 0x40), (PT_GNU_STACK, 0, 0, 0)]
    phoff = struct.calcsize(EHDR)
    shoff = size - sections * struct.calcsize(SHDR) if sections else 0
    ident = b"\x7fELF" + bytes([elf_class, 1, 1, 0]) + bytes(8)
    head = struct.pack(EHDR, ident, e_type, machine, 1, 0, phoff, shoff, 0, phoff,
                       struct.calcsize(PHDR), len(segments), struct.calcsize(SHDR), sections, 0)
    for p_type, offset, filesz, memsz in segments:
        head += struct.pack(PHDR, p_type, 5, offset, offset, offset, filesz, memsz, 0x1000)
    body = head + bytes(size - len(head) - sections * struct.calcsize(SHDR))
    return body + bytes(sections * struct.calcsize(SHDR))


def elf_corpus():
    put("elf", "plugin.so", elf())
    put("elf", "with_sections.so", elf(sections=3, size=0x300))
    put("elf", "truncated.so", elf()[:0x150])
    put("elf", "segment_past_end.so", elf(segments=[(PT_LOAD, 0, 0x400, 0x400), (PT_DYNAMIC, 0x180, 0x40, 0x40)]))
    put("elf", "executable.so", elf(e_type=2))
    put("elf", "aarch64.so", elf(machine=183))
    put("elf", "elf32.so", elf(elf_class=1))
    put("elf", "not_elf.so", b"#!/bin/sh\necho not a library\n")


if __name__ == "__main__":
    model_corpus()
    idx_corpus()
    csv_corpus()
    safetensors_corpus()
    calibration_corpus()
    elf_corpus()
