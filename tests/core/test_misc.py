"""Array API inspection namespace and small functions."""
import numpy as np
import pytest

import ember


def test_astype_function_form():
    x = ember.asarray([1.7, -2.2])
    assert ember.astype(x, ember.int32 if hasattr(ember, "int32") else np.int32).tolist() == [1, -2]
    same = ember.astype(x, x.dtype, copy=False)
    assert same is x
    assert ember.astype(x, x.dtype) is not x


def test_shape_queries():
    assert ember.shape([[1, 2, 3]]) == (1, 3)
    assert ember.ndim(2.0) == 0
    assert ember.size(ember.zeros((2, 5))) == 10
    assert ember.size(ember.zeros((2, 5)), axis=1) == 5


def test_namespace_info():
    info = ember.__array_namespace_info__()
    assert info.default_device() == "cpu"
    assert info.devices() == [ember.Device("cpu")]
    assert info.default_dtypes()["real floating"] == np.float32
    assert info.default_dtypes()["indexing"] == np.int64
    assert set(info.dtypes(kind="unsigned integer")) == {"uint8", "uint16", "uint32", "uint64"}
    # the standard's 13 dtypes; float16 and bfloat16 are ember extensions it does not list
    assert len(info.dtypes()) == 13
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}
    assert ember.zeros(2, dtype=ember.float16).dtype == np.float16     # still supported
    assert "bool" in info.dtypes(kind=("bool", "real floating"))
    with pytest.raises(ValueError, match="unknown kind"):
        info.dtypes(kind="strings")
    assert info.capabilities()["boolean indexing"] is True


def test_namespace_of_array():
    x = ember.zeros((2,))
    assert x.__array_namespace__() is ember
    assert ember.__array_api_version__ == "2024.12"
    with pytest.raises(ValueError):
        x.__array_namespace__(api_version="1999.01")


def test_version_is_the_build_and_distribution_version():
    # written once, in meson.build: the build record and the installed metadata carry it
    import importlib.metadata
    from ember import _build_config
    assert ember.__version__ == _build_config.VERSION
    try:
        dist_version = importlib.metadata.version("ember")
    except importlib.metadata.PackageNotFoundError:      # pragma: no cover (not installed)
        pytest.skip("ember is not installed as a distribution")
    assert ember.__version__ == dist_version
