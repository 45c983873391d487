#!/usr/bin/python3
"""gen_bad_safetensors.py: hand-made broken .safetensors files for the loader tests.

Writes tests/data/safetensors/NAME.safetensors and NAME.err, the one-line error
(`qatscope: ` prefix excluded) the loader must produce for it.  Plain Python,
no third-party modules.  Run from the repository root.
"""
import json
import os
import struct

OUT = "tests/data/safetensors"


def hdr_file(header, data=b"", raw_header=None, claimed=None):
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    n = len(h) if claimed is None else claimed
    return struct.pack("<Q", n) + h + data


F32x6 = struct.pack("<6f", *range(6))
CASES = {
    "too_short": (b"\x08\x00\x00\x00",
                  "file has 4 bytes, a safetensors file has >= 8"),
    "header_past_eof": (hdr_file(None, raw_header=b"{}", claimed=1000),
                        "header claims 1000 bytes, file has 2 after the length field"),
    "header_len_huge": (hdr_file(None, raw_header=b"{}", claimed=1 << 63),
                        "header claims 9223372036854775808 bytes, file has 2 after the length field"),
    "bad_json": (hdr_file(None, raw_header=b"{\"w\": [1,"),
                 "header: invalid JSON at byte 9: ']' expected near end of file"),
    "not_object": (hdr_file([1, 2]), "header: $: expected object, found array"),
    "duplicate_key": (hdr_file(None, raw_header=b'{"a":{},"a":{}}'),
                      "header: invalid JSON at byte 11: duplicate object key near '\"a\"'"),
    "unknown_dtype": (hdr_file({"w": {"dtype": "F12", "shape": [6], "data_offsets": [0, 24]}}, F32x6),
                      "tensor 'w': unknown dtype 'F12'"),
    "negative_dim": (hdr_file({"w": {"dtype": "F32", "shape": [-1, 6], "data_offsets": [0, 24]}}, F32x6),
                     "$.w.shape[0]: expected integer in [0, 9223372036854775807], found -1"),
    "shape_overflow": (hdr_file({"w": {"dtype": "F32", "shape": [1 << 62, 1 << 62], "data_offsets": [0, 24]}}, F32x6),
                       "tensor 'w': shape overflows"),
    "size_mismatch": (hdr_file({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}}, F32x6),
                      "tensor 'w': F32 [2, 3] needs 24 bytes, data_offsets give 20"),
    "offsets_past_end": (hdr_file({"w": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}, F32x6),
                         "tensor 'w': data_offsets [0, 32] outside the data section of 24 bytes"),
    "offsets_reversed": (hdr_file({"w": {"dtype": "F32", "shape": [0], "data_offsets": [16, 8]}}, F32x6),
                         "tensor 'w': data_offsets [16, 8] outside the data section of 24 bytes"),
    "offsets_not_ints": (hdr_file({"w": {"dtype": "F32", "shape": [6], "data_offsets": ["0", 24]}}, F32x6),
                         "$.w.data_offsets[0]: expected integer, found string"),
    "missing_fields": (hdr_file({"w": {"dtype": "F32", "shape": [6]}}, F32x6),
                       "$.w.data_offsets: required key is missing"),
    "overlap": (hdr_file({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                          "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, F32x6),
                "tensors 'a' and 'b' overlap in the data"),
    # Hugging Face's reader wants the tensors back to back over the whole data
    # section (InvalidOffset, MetadataIncompleteBuffer) and a metadata map of strings
    "gap": (hdr_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}, F32x6),
            "tensor 'b': data_offsets begin at 16, expected 8 (where the previous tensor ends): "
            "a gap of 8 bytes"),
    "gap_at_start": (hdr_file({"w": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}, F32x6),
                     "tensor 'w': data_offsets begin at 16, expected 0 (the start of the data): "
                     "a gap of 16 bytes"),
    "trailing_bytes": (hdr_file({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, F32x6),
                       "8 bytes after the end of the last tensor's data (byte 16 of the data "
                       "section); expected the file to end there"),
    "metadata_not_string": (hdr_file({"__metadata__": {"format": 5},
                                      "w": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}}, F32x6),
                            "$.__metadata__.format: expected string, found integer"),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (blob, err) in sorted(CASES.items()):
        path = f"{OUT}/{name}.safetensors"
        with open(path, "wb") as f:
            f.write(blob)
        with open(f"{OUT}/{name}.err", "w") as f:
            f.write(f"{path}: {err}\n")
    # a well-formed file whose tensor holds a NaN: only conversion refuses it
    nan = hdr_file({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}},
                   struct.pack("<6f", 0, 1, float("nan"), 3, 4, 5))
    with open(f"{OUT}/nan_value.safetensors", "wb") as f:
        f.write(nan)
    with open(f"{OUT}/nan_value.err", "w") as f:
        f.write(f"{OUT}/nan_value.safetensors: tensor 'w': element 2 is NaN\n")


if __name__ == "__main__":
    main()
