"""CUDA math library catalogs (catalogs/cublas.toml, cufft.toml, cusolver.toml, cusparse.toml,
curand.toml): every code of each status enum is an entry, the framework print forms find them,
handle-creation failures raise runtime-init-failed while kernel/program codes stay benign, and
rules/nvidia.toml turns a logged cuFFT/cuBLAS failure into toolkit-runtime-mismatch only when the
logs also show a GPU newer than the CUDA release of the framework build."""

from __future__ import annotations

import pytest

from npu_doctor.catalog import load_catalogs

from conftest import check_json, finding_ids

CATALOGS = load_catalogs()

# The enums of cublas_api.h, cufft.h, cusolver_common.h, cusparse.h and curand.h (CUDA 12.6.3).
ENUMS = {
    "cublas": {0, 1, 3, 7, 8, 11, 13, 14, 15, 16},
    "cufft": set(range(0, 17)),
    "cusolver": set(range(0, 17)) | {20, 21, 22, 23, 25, 26, 30, 31},
    "cusparse": set(range(0, 12)),
    "curand": {0, 100, 101, 102, 103, 104, 105, 106, 201, 202, 203, 204, 999},
}


@pytest.mark.parametrize("cid", sorted(ENUMS))
def test_every_code_of_the_enum_is_an_entry(cid):
    cat = next(c for c in CATALOGS.catalogs if c.id == cid)
    assert {int(e.code) for e in cat.entries if e.code is not None} == ENUMS[cid]


def _rules(line):
    return {(e.catalog, e.rule) for e, _ in CATALOGS.match_line(line, ("runtime",)) if e.rule}


@pytest.mark.parametrize("line,catalog,rule", [
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`", "cublas", "runtime-init-failed"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "cublas", "runtime-init-failed"),
    ("E tensorflow/stream_executor/cuda/cuda_blas.cc:366] failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED", "cublas", "runtime-init-failed"),
    ("RuntimeError: cusolver error: 7, when calling `cusolverDnCreate(handle)`", "cusolver", "runtime-init-failed"),
    ("jaxlib/gpu/solver_handle_pool.cc:37: operation gpusolverDnCreate(&handle) failed: cuSolver internal error", "cusolver", "runtime-init-failed"),
    ("cupy_backends.cuda.libs.curand.CURANDError: CURAND_STATUS_INITIALIZATION_FAILED", "curand", "runtime-init-failed"),
    ("RuntimeError: cuFFT error: CUFFT_SETUP_FAILED", "cufft", "runtime-init-failed"),
    ("[FT][ERROR] CUDA runtime error: CUBLAS_STATUS_ARCH_MISMATCH open_attention.h:171", "cublas", "toolkit-runtime-mismatch"),
    ("RuntimeError: Library cublas64_12.dll is not found or cannot be loaded", "cublas", "missing-shared-library"),
])
def test_environment_codes_raise(line, catalog, rule):
    assert (catalog, rule) in _rules(line)


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
    "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`",
    "RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR",
    "cusolver error: CUSOLVER_STATUS_INTERNAL_ERROR, when calling `cusolverDnSgesvdj(handle, jobz, econ, m, n, A, lda, S, U, ldu, V, ldv, work, lwork, info, params)`",
    "RuntimeError: cublas runtime error : the GPU program failed to execute at /pytorch/aten/src/THC/THCBlas.cu:258",
])
def test_kernel_and_program_codes_are_benign(line):
    assert not _rules(line)


def _snapshot(tmp_path, text):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "app.log").write_text(text)
    return tmp_path


def test_tensorflow_cuda10_build_on_ampere_is_a_mismatch(tmp_path):
    log = ("I tensorflow/stream_executor/platform/default/dso_loader.cc:44] Successfully opened dynamic library libcudart.so.10.0\n"
           "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1326] Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 22000 MB memory) -> physical GPU (device: 0, name: GeForce RTX 3090, pci bus id: 0000:01:00.0, compute capability: 8.6)\n"
           "E tensorflow/stream_executor/cuda/cuda_blas.cc:428] failed to run cuBLAS routine: CUBLAS_STATUS_EXECUTION_FAILED\n")
    assert "toolkit-runtime-mismatch" in finding_ids(check_json(_snapshot(tmp_path, log)))


def test_torch_cu116_wheel_tag_on_ada_is_a_mismatch(tmp_path):
    log = ("PyTorch version: 1.13.0+cu116\n"
           "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090\n"
           "RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR\n")
    assert "toolkit-runtime-mismatch" in finding_ids(check_json(_snapshot(tmp_path, log)))


@pytest.mark.parametrize("build,gpu", [("11.8", "NVIDIA GeForce RTX 4090"), ("11.7", "NVIDIA GeForce RTX 3090"),
                                       ("12.4", "NVIDIA H100 80GB HBM3")])
def test_no_mismatch_when_the_build_knows_the_gpu(tmp_path, build, gpu):
    log = (f"CUDA used to build PyTorch: {build}\n"
           f"GPU models and configuration: GPU 0: {gpu}\n"
           "RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR\n")
    assert "toolkit-runtime-mismatch" not in finding_ids(check_json(_snapshot(tmp_path, log)))
