"""Pickles written opcode by opcode, for the hostile-file tests and the fuzzer: the five containers a pickle
reaches embscope in (a .pkl, an np.save object .npy, an object member of an .npz, a torch zip's data.pkl,
a legacy torch file), the attack classes found so far, and a structure-aware generator of random pickle
programs over the allow-list and the shapes of the descriptions it builds (numpy arrays, dtypes, scalars,
torch tensor records and storages). Nothing here needs torch: the torch files are written by hand, as
torch.save lays them out."""

from __future__ import annotations

import io
import pickle
import random
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

TABLE = (np.arange(40, dtype="<f4").reshape(10, 4) - 17) / 7  # a valid 10 x 4 token table
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


# --- opcodes ---------------------------------------------------------------------------------------

def glob(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def s(text: str) -> bytes:  # BINUNICODE
    data = text.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(data)) + data


def b(data: bytes) -> bytes:  # SHORT_BINBYTES / BINBYTES
    return (b"C" + bytes([len(data)]) if len(data) < 256 else b"B" + struct.pack("<I", len(data))) + data


def i(n: int) -> bytes:
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -2**31 <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    data = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return (b"\x8a" + bytes([len(data)]) if len(data) < 256 else b"\x8b" + struct.pack("<i", len(data))) + data


def tup(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def call(func: bytes, *args: bytes) -> bytes:
    return func + tup(*args) + b"R"


def dict_(*pairs: tuple[bytes, bytes]) -> bytes:
    return b"}" + (b"(" + b"".join(k + v for k, v in pairs) + b"u" if pairs else b"")


def list_(*items: bytes) -> bytes:
    return b"]" + (b"(" + b"".join(items) + b"e" if items else b"")


NONE, TRUE, FALSE = b"N", b"\x88", b"\x89"


def proto(body: bytes, protocol: int = 2) -> bytes:
    return b"\x80" + bytes([protocol]) + body + b"."


def numpy_body(array: np.ndarray) -> bytes:
    """An array as numpy pickles it (protocol 2, _reconstruct then BUILD), without PROTO and STOP."""
    return pickle.dumps(array, protocol=2)[2:-1]


def dtype(code: str, state: bytes | None = None) -> bytes:
    """numpy.dtype(code, False, True) and the BUILD with the state numpy writes after it."""
    if state is None:
        size = int(code[1:]) if code[1:].isdigit() else 0
        if code[0] == "S":
            state = tup(i(3), s("|"), NONE, NONE, NONE, i(size), i(1), i(0))
        elif code[0] == "U":
            state = tup(i(3), s("<"), NONE, NONE, NONE, i(4 * size), i(4), i(8))
        else:
            order = "|" if code[-1] == "1" or code[0] in "bO" else "<"
            state = tup(i(3), s(order), NONE, NONE, NONE, i(-1), i(-1), i(63 if code[0] == "O" else 0))
    return call(glob("numpy", "dtype"), s(code), FALSE, TRUE) + state + b"b"


def reconstructed(shape: tuple[int, ...], code: str, data: bytes, fortran: bool = False) -> bytes:
    """numpy's own pickle of an array, written out: _reconstruct(ndarray, (0,), b'b'), BUILD (1, shape, dtype, order, data)."""
    empty = call(glob("numpy.core.multiarray", "_reconstruct"), glob("numpy", "ndarray"), tup(i(0)), b(b"b"))
    state = tup(i(1), tup(*map(i, shape)), dtype(code), TRUE if fortran else FALSE, b(data))
    return empty + state + b"b"


def storage_pid(key: str = "0", kind: str = "FloatStorage", numel: int = 40, legacy: bool = False) -> bytes:
    """A torch storage reference: ('storage', torch.<kind>, key, 'cpu', numel[, view]) + BINPERSID."""
    return tup(s("storage"), glob("torch", kind), s(key), s("cpu"), i(numel), *([NONE] if legacy else [])) + b"Q"


def torch_tensor(size: tuple[int, ...] = (10, 4), stride: tuple[int, ...] = (4, 1), offset: int = 0,
                 key: str = "0", kind: str = "FloatStorage", numel: int = 40, legacy: bool = False) -> bytes:
    return call(glob("torch._utils", "_rebuild_tensor_v2"), storage_pid(key, kind, numel, legacy), i(offset),
                tup(*map(i, size)), tup(*map(i, stride)), FALSE, call(glob("collections", "OrderedDict")))


# --- the five containers: `table` is the token table's value, `extra` a value beside it ------------

def write_pkl(directory: Path, table: bytes, extra: bytes, protocol: int = 2) -> Path:
    path = directory / "model.pkl"
    path.write_bytes(proto(dict_((s("params"), dict_((s("token_emb"), table))), (s("extra"), extra)), protocol))
    return path


def npy_header(descr: str, shape: tuple[int, ...]) -> bytes:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": shape})
    return header.getvalue()


def object_array(shape: tuple[int, ...], items: list[bytes], protocol: int = 2) -> bytes:
    """An object array as np.save pickles it after its header."""
    empty = call(glob("numpy.core.multiarray", "_reconstruct"), glob("numpy", "ndarray"), tup(i(0)), b(b"b"))
    state = tup(i(1), tup(*map(i, shape)), dtype("O8"), FALSE, list_(*items))
    return proto(empty + state + b"b", protocol)


def write_npy_object(directory: Path, table: bytes, extra: bytes, protocol: int = 2) -> Path:
    path = directory / "model.npy"
    doc = dict_((s("params"), dict_((s("token_emb"), table))), (s("extra"), extra))
    path.write_bytes(npy_header("|O", ()) + object_array((), [doc], protocol))
    return path


def write_npz_object(directory: Path, table: bytes, extra: bytes, protocol: int = 2) -> Path:
    """A real token_emb member and an object member holding [extra] (`table` has no place here)."""
    good = io.BytesIO()
    np.save(good, TABLE)
    path = directory / "params.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("token_emb.npy", good.getvalue())
        zf.writestr("extra.npy", npy_header("|O", (1,)) + object_array((1,), [extra], protocol))
    return path


def write_torch_zip(directory: Path, table: bytes, extra: bytes, protocol: int = 2) -> Path:
    """torch.save's zip layout: archive/data.pkl, archive/byteorder, archive/data/<key>, archive/version."""
    path = directory / "ckpt.pt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", proto(dict_((s("transformer.wte.weight"), table), (s("extra"), extra)),
                                              protocol))
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", TABLE.tobytes())
        zf.writestr("archive/version", "3\n")
    return path


def write_torch_legacy(directory: Path, table: bytes, extra: bytes, protocol: int = 2) -> Path:
    """torch.save's legacy layout: magic, protocol, system info, the object, the storage keys, then each
    storage as an int64 element count and its elements."""
    system = dict_((s("protocol_version"), i(1001)), (s("little_endian"), TRUE),
                   (s("type_sizes"), dict_((s("short"), i(2)), (s("int"), i(4)), (s("long"), i(4)))))
    # storage '0' is listed below, so some tensor must use it whatever `table` is (torch.load needs that too)
    obj = dict_((s("transformer.wte.weight"), table), (s("extra"), extra), (s("anchor"), torch_tensor(legacy=True)))
    path = directory / "ckpt.pt"
    path.write_bytes(proto(i(LEGACY_MAGIC)) + proto(i(1001)) + proto(system) + proto(obj, protocol)
                     + proto(list_(s("0"))) + struct.pack("<q", TABLE.size) + TABLE.tobytes())
    return path


Writer = Callable[..., Path]
CONTAINERS: dict[str, tuple[Writer, bool, bool]] = {  # name -> (writer, holds torch records, legacy pids)
    "pkl": (write_pkl, False, False),
    "npy-object": (write_npy_object, False, False),
    "npz-object": (write_npz_object, False, False),
    "torch-zip": (write_torch_zip, True, False),
    "torch-legacy": (write_torch_legacy, True, True),
}


def default_table(container: str) -> bytes:
    _, torch_like, legacy = CONTAINERS[container]
    return torch_tensor(legacy=legacy) if torch_like else numpy_body(TABLE)


def write(container: str, directory: Path, table: bytes | None = None, extra: bytes = NONE,
          protocol: int = 2) -> Path:
    writer = CONTAINERS[container][0]
    return writer(directory, default_table(container) if table is None else table, extra, protocol)


# --- a structure-aware generator of pickle programs -------------------------------------------------

NUMPY_NAMES = [("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy.core.multiarray", "scalar"), ("numpy._core.numeric", "_frombuffer"), ("numpy", "ndarray"),
               ("numpy", "dtype"), ("collections", "OrderedDict"), ("collections", "Counter"),
               ("_codecs", "encode"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"),
               ("builtins", "complex")]
TORCH_NAMES = [("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor_v3"),
               ("torch._utils", "_rebuild_tensor"), ("torch._utils", "_rebuild_parameter"),
               ("torch._utils", "_rebuild_parameter_with_state"), ("torch._tensor", "_rebuild_from_type_v2"),
               ("torch", "Size"), ("torch", "device"), ("torch", "Tensor"), ("torch.nn.parameter", "Parameter"),
               ("torch", "FloatStorage"), ("torch", "HalfStorage"), ("torch", "BFloat16Storage"),
               ("torch", "LongStorage"), ("torch.storage", "UntypedStorage"), ("torch", "float32"),
               ("torch", "bfloat16"), ("torch", "float8_e4m3fn"), ("torch", "complex64"), ("torch", "uint16"),
               ("torch", "QInt8Storage"), ("torch", "qint8"), ("torch", "per_tensor_affine"),
               ("torch._utils", "_rebuild_qtensor"), ("torch._utils", "_rebuild_sparse_tensor"),
               ("torch._utils", "_rebuild_meta_tensor_no_storage"), ("torch._utils", "_rebuild_nested_tensor"),
               ("torch._utils", "_rebuild_device_tensor_from_cpu_tensor"),
               ("torch._utils", "_rebuild_device_tensor_from_numpy"), ("torch.serialization", "_get_layout")]
OFF_LIST = [("os", "system"), ("builtins", "eval"), ("builtins", "getattr"), ("numpy", "load"),
            ("copyreg", "_reconstructor"), ("numpy", "ndarray.__new__"), ("__builtin__", "eval")]
DTYPE_CODES = ["f4", "f2", "f8", "i8", "i4", "i2", "i1", "u1", "u2", "u4", "u8", "b1", "c8", "c16", "O8", "U3",
               "S2", "S0", "f3", "M8", "V4", "f16", "i16", "U999999999"]
STORAGE_KINDS = ["FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "ByteStorage", "BoolStorage",
                 "DoubleStorage", "ComplexFloatStorage"]
EDGE_INTS = [0, 1, 2, 3, 4, 7, 8, 10, 39, 40, 41, 160, 255, 256, 2**16, 2**31 - 1, 2**31, 2**32, 2**48, 2**62,
             2**63, 2**64, -1, -2**31, 10**30, 2**600]


class ProgramGenerator:
    """Random programs that leave one value on the pickle stack, built from the opcodes and allowed names
    real pickles use, in shapes close to real ones (so that they get past the first check and reach the
    deeper ones), with a few off-list names and broken shapes mixed in."""

    def __init__(self, rng: random.Random, torch_like: bool, legacy: bool):
        self.rng, self.torch_like, self.legacy = rng, torch_like, legacy
        self.memo = 0

    def small(self) -> int:
        return self.rng.choice(EDGE_INTS) if self.rng.random() < 0.3 else self.rng.randrange(0, 12)

    def atom(self) -> bytes:
        rng = self.rng
        kind = rng.randrange(9)
        if kind == 0:
            return i(self.small() * rng.choice((1, -1)))
        if kind == 1:
            return b"G" + struct.pack(">d", rng.choice((0.5, -1e300, float("nan"), float("inf"), 3.0)))
        if kind == 2:
            return s("".join(chr(rng.choice((97, 98, 0, 27, 0x263A, 0xD800))) for _ in range(rng.randrange(6))))
        if kind == 3:
            return b(bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 4, 8, 16, 40, 160)))))
        if kind == 4:
            return rng.choice((NONE, TRUE, FALSE))
        if kind == 5:  # a length that lies
            op, fmt = rng.choice(((b"\x8d", "<Q"), (b"\x8e", "<Q"), (b"\x96", "<Q"), (b"B", "<I"), (b"X", "<I")))
            lengths = (2**34, 2**62) if fmt == "<Q" else (2**31 - 1, 2**32 - 1)
            return op + struct.pack(fmt, rng.choice(lengths)) + b"ab"
        if kind == 6:
            return b"\x96" + struct.pack("<Q", 4) + b"\x00\x00\x80?"  # BYTEARRAY8
        if kind == 7:
            return s(rng.choice(("step", "iter_num", "config", "model_args", "params", "storage", "cpu", "0", "little")))
        return i(rng.choice(EDGE_INTS))

    def value(self, depth: int = 0) -> bytes:
        rng = self.rng
        if depth > 5:
            return self.atom()
        roll = rng.random()
        if roll < 0.25:
            made = self.atom()
        elif roll < 0.40:
            made = self.container(depth)
        elif roll < 0.55:
            made = self.array()
        elif roll < 0.60:
            made = self.scalar()
        elif roll < 0.72 and self.torch_like:
            made = self.tensor(depth)
        elif roll < 0.82:
            made = self.call(depth)
        elif roll < 0.88:
            made = self.value(depth + 1) + self.value(depth + 1) + b"b"  # BUILD with any state
        elif roll < 0.94 and self.memo:
            made = (b"h" + bytes([rng.randrange(self.memo + 2) % 256])) if rng.random() < 0.8 else \
                   b"j" + struct.pack("<I", rng.choice((2**31, self.memo)))
        else:
            made = self.odd(depth)
        if rng.random() < 0.2:
            made += b"q" + bytes([self.memo % 256])  # BINPUT
            self.memo += 1
        return made

    def container(self, depth: int) -> bytes:
        rng = self.rng
        items = [self.value(depth + 1) for _ in range(rng.randrange(4))]
        kind = rng.randrange(6)
        if kind == 0:
            return list_(*items)
        if kind == 1:
            return b"(" + b"".join(items) + b"t"
        if kind == 2:
            keys = [self.atom() if rng.random() < 0.8 else self.value(depth + 1) for _ in items]
            return dict_(*zip(keys, items))
        if kind == 3:
            return b"\x8f(" + b"".join(items) + b"\x90"  # EMPTY_SET, ADDITEMS
        if kind == 4:
            return b"(" + b"".join(items) + b"\x91"  # FROZENSET
        nested = b")"
        for _ in range(rng.choice((1, 3, 70, 2000))):
            nested += b"\x85"  # TUPLE1: a key nested this deep
        return dict_((nested, self.atom()))

    def array(self) -> bytes:
        """numpy's pickle of an array, mostly as numpy writes it, with the sizes now and then off."""
        rng = self.rng
        code = rng.choice(DTYPE_CODES[:8]) if rng.random() < 0.7 else rng.choice(DTYPE_CODES)
        shape = tuple(self.small() if rng.random() < 0.2 else rng.randrange(0, 6) for _ in range(rng.randrange(4)))
        itemsize = int(code[1:]) * (4 if code[0] == "U" else 1) if code[1:].isdigit() and len(code) < 6 else 4
        count = int(np.prod(shape, dtype=object)) if all(d < 2**20 for d in shape) else 1
        length = min(count * itemsize, 4096) + (rng.choice((-1, 1, 4)) if rng.random() < 0.2 else 0)
        data = bytes(rng.randrange(256) for _ in range(max(length, 0)))
        if code == "O8":
            data_op = list_(*[self.atom() for _ in range(min(count, 4))])
        else:
            data_op = b(data)
        if rng.random() < 0.25:  # protocol 5's form
            return call(glob("numpy._core.numeric", "_frombuffer"), b"\x96" + struct.pack("<Q", len(data)) + data,
                        dtype(code), tup(*map(i, shape)), s(rng.choice("CFX")))
        order = rng.choice((FALSE, TRUE)) if rng.random() < 0.9 else i(1)
        version = [] if rng.random() < 0.1 else [i(rng.choice((1, 1, 1, 2)))]
        state = tup(*version, tup(*map(i, shape)), self.dtype(code), order, data_op)
        subtype = glob("numpy", "ndarray") if rng.random() < 0.95 else glob("collections", "OrderedDict")
        empty = tup(i(0)) if rng.random() < 0.95 else tup(i(self.small()))
        built = call(glob(rng.choice(("numpy.core.multiarray", "numpy._core.multiarray")), "_reconstruct"),
                     subtype, empty, b(b"b"))
        return built + state + b"b" + (state + b"b" if rng.random() < 0.03 else b"")

    def dtype(self, code: str) -> bytes:
        rng = self.rng
        if rng.random() < 0.85:
            return dtype(code)
        fields = [i(3), s(rng.choice("<>|=x")), NONE, NONE, NONE, i(rng.choice((-1, 0, 8))), i(-1), i(rng.choice((0, 63)))]
        if rng.random() < 0.5:
            del fields[rng.randrange(len(fields))]
        return dtype(code, tup(*fields))

    def scalar(self) -> bytes:
        code = self.rng.choice(DTYPE_CODES)
        return call(glob("numpy.core.multiarray", "scalar"), dtype(code),
                    b(bytes(self.rng.randrange(256) for _ in range(self.rng.choice((1, 2, 4, 8, 9))))))

    def tensor(self, depth: int) -> bytes:
        rng = self.rng
        numel = 40 if rng.random() < 0.8 else self.small()
        pid = storage_pid(rng.choice(("0", "0", "0", "1", "../x")), rng.choice(STORAGE_KINDS) if rng.random() < 0.3
                          else "FloatStorage", numel, self.legacy)
        if rng.random() < 0.1:
            pid = tup(*[self.value(depth + 1) for _ in range(rng.randrange(7))]) + b"Q"
        ndim = rng.randrange(4)
        size = tuple(self.small() if rng.random() < 0.3 else rng.randrange(1, 11) for _ in range(ndim))
        stride = tuple(self.small() if rng.random() < 0.3 else rng.choice((0, 1, 4)) for _ in range(ndim))
        offset = self.small() if rng.random() < 0.2 else 0
        hooks = call(glob("collections", "OrderedDict"))
        which = rng.randrange(4)
        if which == 0:
            made = call(glob("torch._utils", "_rebuild_tensor_v2"), pid, i(offset), tup(*map(i, size)),
                        tup(*map(i, stride)), FALSE, hooks)
        elif which == 1:
            made = call(glob("torch._utils", "_rebuild_tensor_v3"), pid, i(offset), tup(*map(i, size)),
                        tup(*map(i, stride)), FALSE, hooks, glob("torch", rng.choice(("float32", "bfloat16",
                                                                                       "uint16", "float8_e5m2"))))
        elif which == 2:
            inner = torch_tensor(size, stride, offset, legacy=self.legacy)
            made = call(glob("torch._utils", "_rebuild_parameter"), inner, FALSE, hooks)
        else:
            inner = tup(pid, i(offset), tup(*map(i, size)), tup(*map(i, stride)), FALSE, hooks)
            made = call(glob("torch._tensor", "_rebuild_from_type_v2"), glob("torch._utils", "_rebuild_tensor_v2"),
                        glob("torch", "Tensor"), inner, dict_())
        return made

    def call(self, depth: int) -> bytes:
        rng = self.rng
        names = NUMPY_NAMES + (TORCH_NAMES if self.torch_like else [])
        module, name = rng.choice(names) if rng.random() < 0.95 else rng.choice(OFF_LIST)
        func = glob(module, name) if rng.random() < 0.7 else s(module) + s(name) + b"\x93"  # STACK_GLOBAL
        return call(func, *[self.value(depth + 1) for _ in range(rng.randrange(5))])

    def odd(self, depth: int) -> bytes:
        """The opcodes real pickles of arrays rarely use: NEWOBJ, INST, OBJ, EXT, PERSID, DUP, POP."""
        rng = self.rng
        module, name = rng.choice(NUMPY_NAMES + OFF_LIST)
        kind = rng.randrange(7)
        if kind == 0:
            return glob(module, name) + tup(*[self.value(depth + 1) for _ in range(2)]) + b"\x81"  # NEWOBJ
        if kind == 1:
            return b"(" + self.value(depth + 1) + b"i" + module.encode() + b"\n" + name.encode() + b"\n"  # INST
        if kind == 2:
            return b"(" + glob(module, name) + self.value(depth + 1) + b"o"  # OBJ
        if kind == 3:
            return b"\x82" + bytes([rng.randrange(256)])  # EXT1
        if kind == 4:
            return self.value(depth + 1) + b"Q"  # BINPERSID
        if kind == 5:
            return self.value(depth + 1) + b"2"  # DUP: two values, one popped below
        return self.value(depth + 1) + b"0" + self.value(depth + 1)  # POP


def generated_case(container: str, directory: Path, seed: int) -> Path:
    """One random program in `container`, as the token table or beside it; now and then a few bytes flipped."""
    rng = random.Random(seed)
    _, torch_like, legacy = CONTAINERS[container]
    generator = ProgramGenerator(rng, torch_like, legacy)
    payload = generator.value()
    as_table = rng.random() < 0.5
    table = payload if as_table else default_table(container)
    extra = NONE if as_table else payload
    if container == "npz-object":
        extra = payload
    path = write(container, directory, table, extra, protocol=rng.choice((2, 3, 4, 5)))
    if rng.random() < 0.15 and container in ("pkl", "npy-object", "torch-legacy"):
        data = bytearray(path.read_bytes())
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
    return path
