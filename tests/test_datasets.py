"""Tests of gpuopt.datasets: file formats, validation, real data, generators.

Round trips draw fresh inputs from the ``rng`` fixture of conftest.py (its
seed is printed in the report header; ``GPUOPT_TEST_SEED`` replays a run).
Tests of exact file contents use fixed inputs.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gpuopt import datasets as D

HAVE_H5PY = importlib.util.find_spec("h5py") is not None
needs_h5py = pytest.mark.skipif(
    not HAVE_H5PY, reason="h5py is not installed (pip install gpuopt[test])"
)

MNIST_MD5 = {
    "t10k-images-idx3-ubyte.gz": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte.gz": "27ae3e4e09519cfbb04c329615203637",
}


def real_file(*parts: str) -> Path:
    """Path of a reference data file, or skip the test with the reason."""
    root = D.data_dir(required=False)
    if root is None:
        pytest.skip("reference data not found: set GPUOPT_DATA_DIR or provide ../shared/data")
    path = root.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data file {path} is absent")
    return path


# ---------------------------------------------------------------------------
# Data location
# ---------------------------------------------------------------------------


class TestPaths:
    def test_env_var_wins(self, tmp_path, monkeypatch):
        (tmp_path / "mnist").mkdir()
        monkeypatch.setenv("GPUOPT_DATA_DIR", str(tmp_path))
        assert D.data_dir() == tmp_path.resolve()
        assert D.data_path("mnist") == tmp_path.resolve() / "mnist"

    def test_env_var_missing_dir(self, tmp_path, monkeypatch):
        monkeypatch.setenv("GPUOPT_DATA_DIR", str(tmp_path / "nope"))
        assert D.data_dir(required=False) is None
        assert D.data_path("mnist", required=False) is None
        with pytest.raises(FileNotFoundError, match="GPUOPT_DATA_DIR"):
            D.data_dir()

    def test_walk_up_from_cwd(self, tmp_path, monkeypatch):
        monkeypatch.delenv("GPUOPT_DATA_DIR", raising=False)
        data = tmp_path / "shared" / "data"
        data.mkdir(parents=True)
        deep = tmp_path / "checkout" / "src" / "pkg"
        deep.mkdir(parents=True)
        monkeypatch.chdir(deep)
        assert D.data_dir() == data.resolve()

    def test_data_path_missing_file(self, tmp_path, monkeypatch):
        monkeypatch.setenv("GPUOPT_DATA_DIR", str(tmp_path))
        with pytest.raises(FileNotFoundError, match="GPUOPT_DATA_DIR") as info:
            D.data_path("mnist", "absent.gz")
        assert str(tmp_path / "mnist" / "absent.gz") in str(info.value)

    def test_data_path_bad_parts(self, tmp_path, monkeypatch):
        monkeypatch.setenv("GPUOPT_DATA_DIR", str(tmp_path))
        with pytest.raises(ValueError):
            D.data_path()
        with pytest.raises(ValueError, match="relative"):
            D.data_path(str(tmp_path))
        with pytest.raises(TypeError):
            D.data_path(3)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# IDX / MNIST
# ---------------------------------------------------------------------------

IDX_DTYPES = ["u1", "i1", "i2", "i4", "f4", "f8"]


class TestIdx:
    @pytest.mark.parametrize("dtype", IDX_DTYPES)
    @pytest.mark.parametrize("name", ["a.idx", "a.idx.gz"])
    def test_round_trip(self, tmp_path, rng, dtype, name):
        info = np.iinfo(dtype) if dtype[0] in "ui" else None
        if info is not None:
            a = rng.integers(info.min, info.max, size=(3, 4, 5), endpoint=True).astype(dtype)
        else:
            a = rng.normal(size=(3, 4, 5)).astype(dtype)
        path = D.write_idx(tmp_path / name, a)
        assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
        b = D.read_idx(path)
        assert b.dtype == np.dtype(dtype) and b.dtype.isnative
        assert b.flags.writeable and b.flags.c_contiguous
        np.testing.assert_array_equal(a, b)

    def test_header_bytes_and_big_endian(self, tmp_path):
        path = D.write_idx(tmp_path / "x", np.array([[1, 258]], dtype="<i2"))
        assert path.read_bytes() == bytes([0, 0, 0x0B, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 1, 2])

    def test_gzip_detected_by_magic_not_name(self, tmp_path):
        a = np.arange(10, dtype=np.float32)
        plain = D.write_idx(tmp_path / "plain.gz", a, compress=False)
        packed = D.write_idx(tmp_path / "packed.idx", a, compress=True)
        assert plain.read_bytes()[:2] == b"\x00\x00"
        assert packed.read_bytes()[:2] == b"\x1f\x8b"
        np.testing.assert_array_equal(D.read_idx(plain), a)
        np.testing.assert_array_equal(D.read_idx(packed), a)

    def test_writer_is_deterministic(self, tmp_path):
        a = np.arange(100, dtype=np.uint8)
        one = D.write_idx(tmp_path / "1.gz", a).read_bytes()
        two = D.write_idx(tmp_path / "2.gz", a).read_bytes()
        assert one == two

    def test_zero_sized_dimension(self, tmp_path):
        a = np.zeros((0, 28, 28), dtype=np.uint8)
        assert D.read_idx(D.write_idx(tmp_path / "e", a)).shape == (0, 28, 28)

    @pytest.mark.parametrize(
        "blob, match",
        [
            (b"", "too short"),
            (b"\x00\x00\x08", "too short"),
            (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "magic"),
            (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "type code"),
            (b"\x00\x00\x08\x00", "0 dimensions"),
            (b"\x00\x00\x08\x02\x00\x00\x00\x01", "truncated IDX header"),
            (b"\x00\x00\x08\x01\x00\x00\x00\x03\x05\x06", "truncated"),
            (b"\x00\x00\x08\x01\x00\x00\x00\x01\x05\x06", "trailing"),
            (b"\x00\x00\x0c\x01\x00\x00\x00\x01\x00\x00\x00", "truncated"),
        ],
    )
    def test_malformed(self, tmp_path, blob, match):
        path = tmp_path / "bad.idx"
        path.write_bytes(blob)
        with pytest.raises(ValueError, match=match):
            D.read_idx(path)

    def test_truncated_gzip(self, tmp_path):
        blob = gzip.compress(bytes([0, 0, 8, 1, 0, 0, 0, 100]) + bytes(100))
        path = tmp_path / "cut.gz"
        path.write_bytes(blob[: len(blob) // 2])
        with pytest.raises(ValueError, match="gzip"):
            D.read_idx(path)

    def test_missing_file(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="absent"):
            D.read_idx(tmp_path / "absent")
        with pytest.raises(TypeError):
            D.read_idx(123)  # type: ignore[arg-type]

    @pytest.mark.parametrize("dtype", ["i8", "u2", "bool", "c8", "f2"])
    def test_write_unsupported_dtype(self, tmp_path, dtype):
        with pytest.raises(TypeError, match="IDX"):
            D.write_idx(tmp_path / "x", np.zeros(3, dtype=dtype))

    def test_write_scalar(self, tmp_path):
        with pytest.raises(ValueError, match="dimensions"):
            D.write_idx(tmp_path / "x", np.uint8(3))


class TestLoadMnist:
    def _write(self, folder: Path, n_images: int, n_labels: int, gz: bool = True) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        ext = ".gz" if gz else ""
        D.write_idx(folder / f"t10k-images-idx3-ubyte{ext}", np.ones((n_images, 28, 28), np.uint8))
        D.write_idx(folder / f"t10k-labels-idx1-ubyte{ext}", np.arange(n_labels, dtype=np.uint8))

    @pytest.mark.parametrize("sub", ["", "mnist"])
    def test_root(self, tmp_path, sub):
        self._write(tmp_path / sub, 5, 5, gz=bool(sub))
        images, labels = D.load_mnist("t10k", root=tmp_path)
        assert images.shape == (5, 28, 28) and images.dtype == np.uint8
        assert labels.tolist() == [0, 1, 2, 3, 4] and labels.dtype == np.uint8

    def test_count_mismatch(self, tmp_path):
        self._write(tmp_path, 5, 4)
        with pytest.raises(ValueError, match="5 images"):
            D.load_mnist(root=tmp_path)

    def test_wrong_contents(self, tmp_path):
        D.write_idx(tmp_path / "t10k-images-idx3-ubyte", np.ones((2, 28, 28), np.float32))
        D.write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.ones(2, np.uint8))
        with pytest.raises(ValueError, match="uint8 images"):
            D.load_mnist(root=tmp_path)

    def test_missing_and_bad_kind(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="t10k-images"):
            D.load_mnist(root=tmp_path)
        with pytest.raises(ValueError, match="kind"):
            D.load_mnist("test", root=tmp_path)


# ---------------------------------------------------------------------------
# ECE408 HDF5
# ---------------------------------------------------------------------------


def _model_kcrs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    shapes = {"conv1": (32, 1, 5, 5), "conv2": (64, 32, 5, 5), "fc1": (1024, 128), "fc2": (128, 10)}
    return {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}


@needs_h5py
class TestEce408:
    def test_model_round_trip(self, tmp_path, rng):
        import h5py

        model = _model_kcrs(rng)
        path = D.save_ece408_model(tmp_path / "m.hdf5", model)
        with h5py.File(path, "r") as f:
            assert f["conv1"].shape == (5, 5, 1, 32) and f["conv2"].shape == (5, 5, 32, 64)
            np.testing.assert_array_equal(f["conv2"][()][1, 2, 3, 4], model["conv2"][4, 3, 1, 2])
        back = D.load_ece408_model(path)
        for key, value in model.items():
            assert back[key].dtype == np.float32 and back[key].flags.c_contiguous
            np.testing.assert_array_equal(back[key], value)
        stored = D.load_ece408_model(path, layout="file")
        assert stored["conv1"].shape == (5, 5, 1, 32)
        again = D.save_ece408_model(tmp_path / "m2.hdf5", stored, layout="file")
        np.testing.assert_array_equal(D.load_ece408_model(again)["conv2"], model["conv2"])

    def test_model_validation(self, tmp_path, rng):
        model = _model_kcrs(rng)
        bad = dict(model, fc1=np.zeros((1000, 128), np.float32))
        with pytest.raises(ValueError, match="fc1"):
            D.save_ece408_model(tmp_path / "m.hdf5", bad)
        with pytest.raises(ValueError, match="keys"):
            D.save_ece408_model(tmp_path / "m.hdf5", {k: model[k] for k in ("conv1", "conv2")})
        with pytest.raises(ValueError, match="4-D"):
            D.save_ece408_model(tmp_path / "m.hdf5", dict(model, conv1=np.zeros((32, 25))))
        with pytest.raises(TypeError):
            D.save_ece408_model(tmp_path / "m.hdf5", dict(model, fc2=model["fc2"].astype(complex)))
        with pytest.raises(ValueError, match="layout"):
            D.load_ece408_model(tmp_path / "m.hdf5", layout="nchw")

    def test_model_file_missing_dataset(self, tmp_path):
        import h5py

        with h5py.File(tmp_path / "m.hdf5", "w") as f:
            f["conv1"] = np.zeros((5, 5, 1, 32), np.float32)
        with pytest.raises(ValueError, match="/conv2"):
            D.load_ece408_model(tmp_path / "m.hdf5")
        (tmp_path / "junk.hdf5").write_bytes(b"not hdf5 at all")
        with pytest.raises(ValueError, match="HDF5"):
            D.load_ece408_model(tmp_path / "junk.hdf5")

    @pytest.mark.parametrize("layout", ["nchw", "nhwc"])
    def test_test_file_round_trip(self, tmp_path, rng, layout):
        shape = (4, 1, 28, 28) if layout == "nchw" else (4, 28, 28, 1)
        x = rng.random(shape, dtype=np.float32)
        labels = rng.integers(0, 10, size=4)
        path = D.save_ece408_test(tmp_path / "t.hdf5", x, labels, layout=layout)
        x2, labels2 = D.load_ece408_test(path, layout=layout)
        np.testing.assert_array_equal(x2, x)
        assert labels2.dtype == np.int64 and labels2.tolist() == labels.tolist()
        _, onehot = D.load_ece408_test(path, onehot=True)
        assert onehot.dtype == np.float64 and onehot.shape == (4, 10)
        np.testing.assert_array_equal(onehot.argmax(1), labels)
        # one-hot input gives the same file contents; the other layout transposes
        D.save_ece408_test(tmp_path / "t2.hdf5", x, onehot, layout=layout)
        other = "nhwc" if layout == "nchw" else "nchw"
        x3, labels3 = D.load_ece408_test(tmp_path / "t2.hdf5", layout=other)
        np.testing.assert_array_equal(x3.reshape(4, 28, 28), x.reshape(4, 28, 28))
        assert labels3.tolist() == labels.tolist()

    def test_test_file_validation(self, tmp_path):
        x = np.zeros((2, 1, 28, 28), np.float32)
        with pytest.raises(ValueError, match="outside"):
            D.save_ece408_test(tmp_path / "t.hdf5", x, np.array([1, 10]))
        with pytest.raises(ValueError, match="one-hot"):
            D.save_ece408_test(tmp_path / "t.hdf5", x, np.full((2, 10), 0.1))
        with pytest.raises(ValueError, match="2 images"):
            D.save_ece408_test(tmp_path / "t.hdf5", x, np.array([1, 2, 3]))
        with pytest.raises(ValueError, match="shape"):
            D.save_ece408_test(tmp_path / "t.hdf5", x, np.array([1, 2]), layout="nhwc")
        with pytest.raises(TypeError):
            D.save_ece408_test(tmp_path / "t.hdf5", x, np.array([1.0, 2.0]))
        with pytest.raises(ValueError, match="2, 10 or 100"):
            D.load_ece408_test(7)
        with pytest.raises(TypeError):
            D.load_ece408_test(True)
        with pytest.raises(FileNotFoundError):
            D.load_ece408_test(tmp_path / "absent.hdf5")


# ---------------------------------------------------------------------------
# Liao k-means files
# ---------------------------------------------------------------------------


class TestLiao:
    @pytest.mark.parametrize("binary", [True, False])
    def test_round_trip(self, tmp_path, rng, binary):
        x = rng.normal(scale=5.0, size=(50, 7)).astype(np.float32)
        path = D.write_liao(tmp_path / "data", x, binary=binary)
        for mode in (None, binary):
            y = D.read_liao(path, binary=mode)
            assert y.dtype == np.float32 and y.shape == (50, 7)
            if binary:
                np.testing.assert_array_equal(y, x)
            else:  # "%f" rounds to 6 decimals, then float32 rounds to half an ulp
                np.testing.assert_allclose(y, x, rtol=2**-23, atol=5e-7)

    def test_binary_rows(self, tmp_path, rng):
        x = rng.normal(size=(70, 3)).astype(np.float32)
        path = D.write_liao(tmp_path / "b", x, binary=True)
        seen = []
        rows, n = D.read_liao_binary_rows(path, lambda n: seen.append(n) or (20, 55))
        assert n == 70 and seen == [70] and rows.dtype == np.float32 and rows.flags.c_contiguous
        np.testing.assert_array_equal(rows, x[20:55])
        assert D.read_liao_binary_rows(path, lambda n: (70, 70))[0].shape == (0, 3)
        with pytest.raises(ValueError, match="not within the file's 70 objects"):
            D.read_liao_binary_rows(path, lambda n: (60, 71))
        path.write_bytes(path.read_bytes()[:-4])
        with pytest.raises(ValueError, match="not a valid binary k-means file"):
            D.read_liao_binary_rows(path, lambda n: (0, 1))
        with pytest.raises(FileNotFoundError):
            D.read_liao_binary_rows(tmp_path / "absent", lambda n: (0, 1))

    def test_binary_layout(self, tmp_path):
        path = D.write_liao(tmp_path / "b", np.array([[1.0, 2.0]]), binary=True)
        assert path.read_bytes() == (
            np.array([1, 2], "<i4").tobytes() + np.array([1.0, 2.0], "<f4").tobytes()
        )

    def test_ascii_layout(self, tmp_path):
        path = D.write_liao(tmp_path / "a.txt", np.array([[1.5, -2.0], [0.0, 3.25]]), binary=False)
        assert path.read_text() == "1 1.500000 -2.000000 \n2 0.000000 3.250000 \n"

    def test_ascii_separators_and_blank_lines(self, tmp_path):
        path = tmp_path / "a.txt"
        path.write_text("\n  7 1.0,2.0\t3\n\n8\t4 5 ,6\r\n   \n")
        np.testing.assert_array_equal(D.read_liao(path), [[1, 2, 3], [4, 5, 6]])

    @pytest.mark.parametrize(
        "text, match",
        [
            ("1 1 2\n2 3 4 5\n", "line 2"),
            ("1 1 2\n\n3 1\n", "line 3"),
            ("1 1 2\n2 1 x\n", "line 2.*'x'"),
            ("1 1 2\n2\n", "line 2: no coordinates"),
            ("\n  \n", "no objects"),
            ("1 1e300\n", "float32"),
        ],
    )
    def test_ascii_malformed(self, tmp_path, text, match):
        path = tmp_path / "a.txt"
        path.write_text(text)
        with pytest.raises(ValueError, match=match):
            D.read_liao(path)

    def test_binary_malformed(self, tmp_path):
        good = D.write_liao(tmp_path / "b", np.ones((4, 3)), binary=True)
        cut = tmp_path / "cut"
        cut.write_bytes(good.read_bytes()[:-4])
        with pytest.raises(ValueError, match="numObjs=4"):
            D.read_liao(cut, binary=True)
        with pytest.raises(ValueError, match="binary"):
            D.read_liao(cut)  # auto-detect falls back to ASCII, which it is not
        txt = D.write_liao(tmp_path / "a", np.ones((4, 3)), binary=False)
        with pytest.raises(ValueError):
            D.read_liao(txt, binary=True)
        with pytest.raises(FileNotFoundError):
            D.read_liao(tmp_path / "absent")

    def test_writer_validation(self, tmp_path):
        with pytest.raises(ValueError, match="2-D"):
            D.write_liao(tmp_path / "x", np.ones(3), binary=True)
        with pytest.raises(TypeError):
            D.write_liao(tmp_path / "x", np.ones((2, 2), bool), binary=True)
        with pytest.raises(ValueError, match="at least one"):
            D.write_liao(tmp_path / "x", np.ones((0, 2)), binary=False)
        with pytest.raises(ValueError, match="float32"):
            D.write_liao(tmp_path / "x", np.array([[1e300]]), binary=True)
        with pytest.raises(TypeError, match="binary"):
            D.write_liao(tmp_path / "x", np.ones((2, 2)), binary="yes")  # type: ignore[arg-type]
        # integers are accepted and stored as float32
        path = D.write_liao(tmp_path / "x", np.arange(6).reshape(3, 2), binary=True)
        np.testing.assert_array_equal(D.read_liao(path), np.arange(6).reshape(3, 2))

    def test_output_round_trip(self, tmp_path):
        centres = np.array([[1.0, 2.5], [-3.0, 0.125]], np.float32)
        membership = np.array([0, 1, 1, 0, 1])
        c_path, m_path = D.write_liao_output(tmp_path / "edge100.txt", centres, membership)
        assert c_path.name == "edge100.txt.cluster_centres"
        assert m_path.name == "edge100.txt.membership"
        assert c_path.read_text() == "0 1.000000 2.500000 \n1 -3.000000 0.125000 \n"
        assert m_path.read_text() == "0 0\n1 1\n2 1\n3 0\n4 1\n"
        np.testing.assert_array_equal(D.read_liao_centres(c_path), centres)
        got = D.read_liao_membership(m_path)
        assert got.dtype == np.int32 and got.tolist() == membership.tolist()

    def test_output_into_a_folder(self, tmp_path):
        centres = np.array([[1.0, 2.5], [-3.0, 0.125]], np.float32)
        membership = np.array([0, 1, 1])
        (tmp_path / "in").mkdir()
        beside = D.write_liao_output(tmp_path / "in" / "edge100.txt", centres, membership)
        folder = tmp_path / "new" / "deeper"  # created, parents included
        c_path, m_path = D.write_liao_output(tmp_path / "in" / "edge100.txt", centres, membership, out_dir=folder)
        assert (c_path, m_path) == (folder / "edge100.txt.cluster_centres", folder / "edge100.txt.membership")
        assert [p.read_text() for p in (c_path, m_path)] == [p.read_text() for p in beside]
        assert sorted(p.name for p in folder.iterdir()) == ["edge100.txt.cluster_centres", "edge100.txt.membership"]
        with pytest.raises(ValueError, match="membership"):  # rejected before the folder is made
            D.write_liao_output(tmp_path / "p", centres, np.array([0, 2]), out_dir=tmp_path / "never")
        assert not (tmp_path / "never").exists()
        with pytest.raises(OSError):
            D.write_liao_output(tmp_path / "p", centres, membership, out_dir=c_path)  # a file, not a folder
        with pytest.raises(TypeError, match="out_dir"):
            D.write_liao_output(tmp_path / "p", centres, membership, out_dir=3)  # type: ignore[arg-type]

    def test_output_validation(self, tmp_path):
        centres = np.zeros((2, 3))
        with pytest.raises(ValueError, match="membership"):
            D.write_liao_output(tmp_path / "p", centres, np.array([0, 2]))
        with pytest.raises(TypeError, match="membership"):
            D.write_liao_output(tmp_path / "p", centres, np.array([0.0, 1.0]))
        bad = tmp_path / "bad.membership"
        bad.write_text("0 0\n2 1\n")
        with pytest.raises(ValueError, match=r"line 2.*order"):
            D.read_liao_membership(bad)
        bad.write_text("0 0 0\n")
        with pytest.raises(ValueError, match="line 1"):
            D.read_liao_membership(bad)
        bad.write_text("0 -1\n")
        with pytest.raises(ValueError, match="cluster index"):
            D.read_liao_membership(bad)
        bad_c = tmp_path / "bad.cluster_centres"
        bad_c.write_text("1 1.0 2.0\n")
        with pytest.raises(ValueError, match=r"line 1.*expected 0"):
            D.read_liao_centres(bad_c)


# ---------------------------------------------------------------------------
# NCTU sparse-conv lab files
# ---------------------------------------------------------------------------


class TestNctuNeurons:
    @staticmethod
    def _neurons(rng: np.random.Generator) -> np.ndarray:
        x = D.make_nctu_neurons(4, 6, 5, density=0.3, seed=int(rng.integers(2**31)))
        x[2] = 0  # an all-zero map
        x[1, 0, 0] = -32768
        x[1, 5, 4] = 32767
        return x

    def test_txt_round_trip(self, tmp_path, rng):
        x = self._neurons(rng)
        path = D.write_nctu_neurons_txt(tmp_path / "inNeu.txt", x)
        lines = path.read_text().splitlines()
        assert lines[0] == "FM0" and len(lines[1].split()) == 5 and lines[7] == "FM1"
        with pytest.raises(ValueError, match="square"):
            D.read_nctu_neurons_txt(path)
        y = D.read_nctu_neurons_txt(path, shape=(6, 5))
        assert y.dtype == np.int16
        np.testing.assert_array_equal(y, x)

    def test_txt_square_inferred(self, tmp_path, rng):
        x = rng.integers(-(2**15), 2**15, size=(3, 4, 4)).astype(np.int16)
        path = D.write_nctu_neurons_txt(tmp_path / "n.txt", x)
        np.testing.assert_array_equal(D.read_nctu_neurons_txt(path), x)

    def test_coo_round_trip(self, tmp_path, rng):
        x = self._neurons(rng)
        path = D.write_nctu_neurons_coo(tmp_path / "inNeu.coo", x)
        y = D.read_nctu_neurons_coo(path, shape=(6, 5))
        assert y.dtype == np.int16
        np.testing.assert_array_equal(y, x)
        assert "FM2\nNNZ: 0\nData:\nRow:\nCol:\nFM3\n" in path.read_text()

    def test_coo_exact_text(self, tmp_path):
        x = np.array([[[0, 5], [7, 0]]], np.int16)
        path = D.write_nctu_neurons_coo(tmp_path / "n.coo", x)
        assert path.read_text() == "FM0\nNNZ: 2\nData: 5 7\nRow: 0 1\nCol: 1 0\n"

    def test_coo_any_entry_order(self, tmp_path):
        path = tmp_path / "n.coo"
        path.write_text("FM0\nNNZ: 2\nData: 7 5\nRow: 1 0\nCol: 0 1\n")
        np.testing.assert_array_equal(
            D.read_nctu_neurons_coo(path, shape=(2, 2)), [[[0, 5], [7, 0]]]
        )

    @pytest.mark.parametrize(
        "text, match",
        [
            ("FM0\nNNZ: 3\nData: 1 2\nRow: 0 1\nCol: 0 1\n", "Data.*'Row:'"),
            ("FM0\nNNZ: 1\nData: 1 2\nRow: 0\nCol: 0\n", "more values than 'NNZ: 1'"),
            ("FM0\nNNZ: 5\nData: 1 1 1 1 1\nRow: 0 0 0 0 0\nCol: 0 0 0 0 0\n", "NNZ.*outside"),
            ("FM0\nNNZ: 1\nData: 1\nRow: 2\nCol: 0\n", "Row.*outside"),
            ("FM0\nNNZ: 1\nData: 1\nRow: 0\nCol: -1\n", "Col.*outside"),
            ("FM0\nNNZ: 2\nData: 1 2\nRow: 0 0\nCol: 1 1\n", "duplicate"),
            ("FM0\nNNZ: 1\nData: 40000\nRow: 0\nCol: 0\n", "40000 outside"),
            ("FM0\nNNZ: 1\nData: 1.5\nRow: 0\nCol: 0\n", "1.5"),
            ("FM1\nNNZ: 0\nData:\nRow:\nCol:\n", "expected 'FM0'"),
            ("FM0\nNNZ: 1\nData: 1\nRow: 0\n", "end of file"),
            ("", "empty"),
        ],
    )
    def test_coo_malformed(self, tmp_path, text, match):
        path = tmp_path / "bad.coo"
        path.write_text(text)
        with pytest.raises(ValueError, match=match):
            D.read_nctu_neurons_coo(path, shape=(2, 2))

    @pytest.mark.parametrize(
        "text, match",
        [
            ("FM0\n1 2\n3 4\nFM1\n1 2 3\n", "FM1"),
            ("FM0\n1 2\n3 4 5\n", "more than"),
            ("FM0\n1 2\n3 70000\n", "70000 outside"),
            ("FM0\n1 2\n3 x\nFM1\n", "'x'"),
            ("FM0\n1 2\n3 4\nFM2\n1 2 3 4\n", "expected 'FM1'"),
            ("1 2 3 4\n", "FM0"),
        ],
    )
    def test_txt_malformed(self, tmp_path, text, match):
        path = tmp_path / "bad.txt"
        path.write_text(text)
        with pytest.raises(ValueError, match=match):
            D.read_nctu_neurons_txt(path, shape=(2, 2))

    def test_error_reports_line(self, tmp_path):
        path = tmp_path / "bad.coo"
        path.write_text(
            "FM0\nNNZ: 1\nData: 1\nRow: 0\nCol: 0\nFM1\nNNZ: 1\nData: 1\nRow: 9\nCol: 0\n"
        )
        with pytest.raises(ValueError, match=r"line 9: map FM1 Row"):
            D.read_nctu_neurons_coo(path, shape=(2, 2))

    @pytest.mark.parametrize("writer", [D.write_nctu_neurons_txt, D.write_nctu_neurons_coo])
    def test_writer_validation(self, tmp_path, writer):
        with pytest.raises(TypeError, match="integer"):
            writer(tmp_path / "x", np.zeros((1, 2, 2), np.float32))
        with pytest.raises(ValueError, match="3-D"):
            writer(tmp_path / "x", np.zeros((2, 2), np.int16))
        with pytest.raises(ValueError, match="outside"):
            writer(tmp_path / "x", np.full((1, 2, 2), 40000, np.int32))
        with pytest.raises(ValueError, match="non-zero"):
            writer(tmp_path / "x", np.zeros((0, 2, 2), np.int16))

    def test_missing_file(self, tmp_path):
        with pytest.raises(FileNotFoundError):
            D.read_nctu_neurons_txt(tmp_path / "absent.txt")
        with pytest.raises(FileNotFoundError):
            D.read_nctu_neurons_coo(tmp_path / "absent.coo")


class TestNctuFilters:
    @staticmethod
    def _filters(rng: np.random.Generator) -> np.ndarray:
        w = D.make_nctu_filters(3, 4, seed=int(rng.integers(2**31)))
        w[1, 2] = 0  # empty slice
        w[2, 0] = [[1, 0, -2], [0, 0, 0], [3, 0, 4]]  # several non-zeros
        w[0, 3, 1, 1] = -32768
        return w

    def test_txt_round_trip(self, tmp_path, rng):
        w = self._filters(rng)
        path = D.write_nctu_filters_txt(tmp_path / "filt.txt", w)
        assert path.read_text().startswith("FL0\nFM0\n")
        for kwargs in ({}, {"num_slices": 4}, {"kernel_size": 3}):
            got = D.read_nctu_filters_txt(path, **kwargs)
            assert got.dtype == np.int16
            np.testing.assert_array_equal(got, w)
        with pytest.raises(ValueError, match="expected 5"):
            D.read_nctu_filters_txt(path, num_slices=5)

    def test_txt_non_square(self, tmp_path):
        w = np.arange(2 * 3 * 2 * 4, dtype=np.int32).reshape(2, 3, 2, 4) - 10
        path = D.write_nctu_filters_txt(tmp_path / "f.txt", w)
        with pytest.raises(ValueError, match="square"):
            D.read_nctu_filters_txt(path)
        np.testing.assert_array_equal(D.read_nctu_filters_txt(path, kernel_size=(2, 4)), w)

    def test_coo_round_trip(self, tmp_path, rng):
        w = self._filters(rng)
        path = D.write_nctu_filters_coo(tmp_path / "filt.coo", w)
        text = path.read_text()
        assert "FL1\n" in text and "NNZ: 0\nData:\nRow:\nCol:\n" in text
        got = D.read_nctu_filters_coo(path)
        assert got.dtype == np.int16
        np.testing.assert_array_equal(got, w)

    @pytest.mark.parametrize("rs", [(1, 1), (2, 5), (9, 9)])
    def test_coo_kernel_sizes(self, tmp_path, rng, rs):
        w = rng.integers(-3, 4, size=(2, 3, *rs)) * (rng.random((2, 3, *rs)) < 0.3)
        path = D.write_nctu_filters_coo(tmp_path / "f.coo", w)
        np.testing.assert_array_equal(D.read_nctu_filters_coo(path, kernel_size=rs), w)

    def test_coo_lab_layout(self, tmp_path):
        """One non-zero per slice reads as the lab's ``label value`` pairs."""
        path = tmp_path / "filt.coo"
        path.write_text(
            "FL0\nFM0\nNNZ: 1\nData: -4\nRow: 2\nCol: 0\nFM1\nNNZ: 1\nData: 9\nRow: 1\nCol: 1\n"
        )
        w = D.read_nctu_filters_coo(path)
        expected = np.zeros((1, 2, 3, 3), np.int16)
        expected[0, 0, 2, 0] = -4
        expected[0, 1, 1, 1] = 9
        np.testing.assert_array_equal(w, expected)
        assert D.write_nctu_filters_coo(tmp_path / "again.coo", w).read_text() == path.read_text()

    @pytest.mark.parametrize(
        "text, match",
        [
            ("FL0\nFM0\nNNZ: 2\nData: 1\nRow: 0\nCol: 0\n", "Data.*'Row:'"),
            ("FL0\nFM0\nNNZ: 10\n", "NNZ.*outside"),
            ("FL0\nFM0\nNNZ: 1\nData: 1\nRow: 3\nCol: 0\n", "Row.*outside"),
            ("FL0\nFM1\nNNZ: 0\nData:\nRow:\nCol:\n", "expected 'FM0'"),
            ("FL0\nFL1\n", "0 slices"),
            (
                "FL0\nFM0\nNNZ: 0\nData:\nRow:\nCol:\nFM1\nNNZ: 0\nData:\nRow:\nCol:\n"
                "FL1\nFM0\nNNZ: 0\nData:\nRow:\nCol:\n",
                "FL1 has 1 slices",
            ),
            ("FM0\nNNZ: 0\nData:\nRow:\nCol:\n", "expected 'FL0'"),
        ],
    )
    def test_coo_malformed(self, tmp_path, text, match):
        path = tmp_path / "bad.coo"
        path.write_text(text)
        with pytest.raises(ValueError, match=match):
            D.read_nctu_filters_coo(path)

    @pytest.mark.parametrize(
        "text, match",
        [
            ("FL0\nFM0\n1 2 3 4 5 6 7 8 9 10\n", "10 values, not a square"),
            ("FL0\nFM0\n1 2 3 4 5 6 7 8 9\nFM1\n1 2 3 4 5 6 7 8 9 10\n", "more than 3x3"),
            ("FL0\nFM0\n1 2 3 4 5 6 7 8 9\nFM1\n1 2 3\n", "FM1"),
            ("FL0\nFM0\n1 2 3 4 5 6 7 8 99999\n", "99999 outside"),
            ("FL0\n1 2 3 4 5 6 7 8 9\n", "FL0 FM0"),
        ],
    )
    def test_txt_malformed(self, tmp_path, text, match):
        path = tmp_path / "bad.txt"
        path.write_text(text)
        with pytest.raises(ValueError, match=match):
            D.read_nctu_filters_txt(path)

    def test_neuron_file_is_not_a_filter_file(self, tmp_path):
        path = D.write_nctu_neurons_txt(tmp_path / "n.txt", np.ones((2, 3, 3), np.int16))
        with pytest.raises(ValueError, match="FL0"):
            D.read_nctu_filters_txt(path, kernel_size=3)

    @pytest.mark.parametrize("writer", [D.write_nctu_filters_txt, D.write_nctu_filters_coo])
    def test_writer_validation(self, tmp_path, writer):
        with pytest.raises(TypeError, match="integer"):
            writer(tmp_path / "x", np.zeros((1, 1, 3, 3)))
        with pytest.raises(TypeError, match="integer"):
            writer(tmp_path / "x", np.zeros((1, 1, 3, 3), bool))
        with pytest.raises(ValueError, match="4-D"):
            writer(tmp_path / "x", np.zeros((1, 3, 3), np.int16))
        with pytest.raises(ValueError, match="outside"):
            writer(tmp_path / "x", np.full((1, 1, 3, 3), -40000))

    def test_coo_kernel_too_large(self, tmp_path):
        with pytest.raises(ValueError, match=r"1\.\.9"):
            D.write_nctu_filters_coo(tmp_path / "x", np.zeros((1, 1, 10, 3), np.int16))
        with pytest.raises(ValueError, match="kernel_size"):
            D.read_nctu_filters_coo(tmp_path / "x", kernel_size=10)


# ---------------------------------------------------------------------------
# Synthetic generators
# ---------------------------------------------------------------------------


class TestSynthetic:
    @pytest.mark.parametrize("name", sorted(D.KMEANS_SHAPES))
    def test_kmeans_named(self, name):
        x, labels = D.make_kmeans_blobs(name, k=5, seed=1)
        assert x.shape == D.KMEANS_SHAPES[name] and x.dtype == np.float32
        assert labels.shape == (x.shape[0],) and labels.dtype == np.int32
        assert labels.min() >= 0 and labels.max() <= 4

    def test_kmeans_determinism_and_clusters(self, rng):
        seed = int(rng.integers(2**31))
        x1, l1 = D.make_kmeans_blobs(2000, 3, k=4, seed=seed, spread=0.1, scale=50.0)
        x2, l2 = D.make_kmeans_blobs(2000, 3, k=4, seed=seed, spread=0.1, scale=50.0)
        x3, _ = D.make_kmeans_blobs(2000, 3, k=4, seed=seed + 1, spread=0.1, scale=50.0)
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(l1, l2)
        assert not np.array_equal(x1, x3)
        for j in range(4):  # tight clusters: every point lies near its cluster mean
            pts = x1[l1 == j]
            assert np.abs(pts - pts.mean(0)).max() < 1.0

    def test_kmeans_validation(self):
        with pytest.raises(ValueError, match="unknown"):
            D.make_kmeans_blobs("kmeans05")
        with pytest.raises(ValueError, match="d is required"):
            D.make_kmeans_blobs(10)
        with pytest.raises(ValueError, match="conflicts"):
            D.make_kmeans_blobs("kmeans01", 3)
        with pytest.raises(ValueError, match="k"):
            D.make_kmeans_blobs(10, 2, k=0)
        with pytest.raises(TypeError, match="seed"):
            D.make_kmeans_blobs(10, 2, seed=True)
        with pytest.raises(ValueError, match="seed"):
            D.make_kmeans_blobs(10, 2, seed=-1)
        with pytest.raises(ValueError, match="spread"):
            D.make_kmeans_blobs(10, 2, spread=-1.0)

    def test_nctu_filters(self, rng):
        seed = int(rng.integers(2**31))
        w = D.make_nctu_filters(seed=seed)
        assert w.shape == (512, 512, 3, 3) and w.dtype == np.int16
        assert (np.count_nonzero(w.reshape(512, 512, 9), axis=2) == 1).all()
        assert w.min() >= -9 and w.max() <= 9
        np.testing.assert_array_equal(w, D.make_nctu_filters(seed=seed))
        assert not np.array_equal(w, D.make_nctu_filters(seed=seed + 1))
        # positions and values are spread out
        positions = np.argmax(w.reshape(-1, 9) != 0, axis=1)
        assert np.bincount(positions, minlength=9).min() > 0.9 * positions.size / 9
        assert set(np.unique(w).tolist()) == set(range(-9, 10))

    def test_nctu_filters_range(self):
        w = D.make_nctu_filters(4, 5, seed=0, low=0, high=2)
        assert set(np.unique(w).tolist()) <= {0, 1, 2}
        assert (np.count_nonzero(w.reshape(20, 9), axis=1) == 1).all()
        with pytest.raises(ValueError, match="non-zero"):
            D.make_nctu_filters(2, 2, low=0, high=0)
        with pytest.raises(ValueError, match="high"):
            D.make_nctu_filters(2, 2, high=40000)

    def test_nctu_neurons(self, rng):
        seed = int(rng.integers(2**31))
        x = D.make_nctu_neurons(seed=seed)
        assert x.shape == (512, 32, 32) and x.dtype == np.int16
        assert x.min() == 0 and x.max() <= 999
        assert abs(np.count_nonzero(x) / x.size - 0.2) < 0.01
        np.testing.assert_array_equal(x, D.make_nctu_neurons(seed=seed))
        assert not np.array_equal(x, D.make_nctu_neurons(seed=seed + 1))
        y = D.make_nctu_neurons(2, 3, 4, density=1.0, high=32767, seed=0)
        assert y.shape == (2, 3, 4) and (y > 0).all()
        assert not D.make_nctu_neurons(2, 3, 4, density=0.0).any()
        with pytest.raises(ValueError, match="density"):
            D.make_nctu_neurons(density=1.5)

    def test_generated_data_survives_files(self, tmp_path, rng):
        seed = int(rng.integers(2**31))
        w = D.make_nctu_filters(8, 16, seed=seed)
        np.testing.assert_array_equal(
            D.read_nctu_filters_coo(D.write_nctu_filters_coo(tmp_path / "f.coo", w)), w
        )
        x = D.make_nctu_neurons(8, 32, 32, seed=seed)
        np.testing.assert_array_equal(
            D.read_nctu_neurons_coo(D.write_nctu_neurons_coo(tmp_path / "n.coo", x)), x
        )


# ---------------------------------------------------------------------------
# Real reference data (skipped when ../shared/data / $GPUOPT_DATA_DIR is absent)
# ---------------------------------------------------------------------------


@pytest.mark.data
class TestRealData:
    def test_mnist_t10k(self, tmp_path):
        for name, md5 in MNIST_MD5.items():
            raw = gzip.decompress(real_file("mnist", name).read_bytes())
            assert hashlib.md5(raw).hexdigest() == md5
        images, labels = D.load_mnist("t10k")
        assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
        assert labels.shape == (10000,) and labels.dtype == np.uint8
        assert labels[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
        assert labels.max() == 9
        # the writer reproduces the original bytes exactly
        out = D.write_idx(tmp_path / "labels-idx1-ubyte", labels)
        assert hashlib.md5(out.read_bytes()).hexdigest() == MNIST_MD5["t10k-labels-idx1-ubyte.gz"]
        out = D.write_idx(tmp_path / "images-idx3-ubyte", images)
        assert hashlib.md5(out.read_bytes()).hexdigest() == MNIST_MD5["t10k-images-idx3-ubyte.gz"]

    @needs_h5py
    def test_ece408_model(self):
        path = real_file("ece408_2016fa", "model.hdf5")
        model = D.load_ece408_model()
        assert {k: v.shape for k, v in model.items()} == {
            "conv1": (32, 1, 5, 5),
            "conv2": (64, 32, 5, 5),
            "fc1": (1024, 128),
            "fc2": (128, 10),
        }
        stored = D.load_ece408_model(path, layout="file")
        assert stored["conv1"].shape == (5, 5, 1, 32) and stored["conv2"].shape == (5, 5, 32, 64)
        np.testing.assert_array_equal(model["conv2"], stored["conv2"].transpose(3, 2, 0, 1))
        assert all(v.dtype == np.float32 and v.flags.c_contiguous for v in model.values())

    @needs_h5py
    def test_ece408_test_files_are_mnist(self):
        for n in (2, 10, 100):
            real_file("ece408_2016fa", f"test{n}.hdf5")
        real_file("mnist", "t10k-images-idx3-ubyte.gz")
        images, labels = D.load_mnist()
        x, y = D.load_ece408_test(10)
        assert x.shape == (10, 1, 28, 28) and x.dtype == np.float32
        assert y.dtype == np.int64
        np.testing.assert_allclose(x[:, 0], images[:10] / 255.0, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(y, labels[:10])
        x100, y100 = D.load_ece408_test(100, layout="nhwc")
        assert x100.shape == (100, 28, 28, 1)
        np.testing.assert_array_equal(y100, labels[:100])
        _, onehot = D.load_ece408_test(2, onehot=True)
        assert onehot.shape == (2, 10) and onehot.dtype == np.float64

    @pytest.mark.parametrize("name, d", [("color", 9), ("edge", 18), ("texture", 20)])
    def test_liao(self, name, d):
        full = D.read_liao(real_file("kmeans_liao", f"{name}17695.bin"))
        assert full.shape == (17695, d) and full.dtype == np.float32
        head = D.read_liao(real_file("kmeans_liao", f"{name}100.txt"))
        assert head.shape == (100, d)
        np.testing.assert_array_equal(head, full[:100])  # the ASCII file is the first 100 rows

    def test_nctu_neurons(self):
        real_file("nctu_sparse_conv", "inNeu.txt")
        real_file("nctu_sparse_conv", "inNeu.coo")
        dense = D.read_nctu_neurons_txt()
        assert dense.shape == (512, 32, 32) and dense.dtype == np.int16
        assert dense.min() >= 0 and dense.max() <= 999
        assert 0.75 < np.mean(dense == 0) < 0.85
        np.testing.assert_array_equal(D.read_nctu_neurons_coo(), dense)
