"""NVML sampling and `prc-emu record-nvml` against a fake GPU put in
place of nvidia-ml-py's device functions: the module, its error types
and constants, the sampler, the trace writer and reader and the command
line are real. A real GPU runs the same path (docs/control.md)."""
import types

import pynvml
import pytest

from cli.main import main as cli_main
from control.nvml import NvmlSampler, NvmlUnavailable
from scenario.trace import read_trace, timelines


class FakeGpu:
    """One GPU: its SM clock follows `clocks` (one value per read), two
    compute processes, process-utilisation samples newer than asked."""

    def __init__(self, clocks, max_clock=1980, reasons=0):
        self.clocks, self.max_clock, self.reasons = list(clocks), max_clock, reasons
        self.reads = 0
        self.pids = (4242, 4343)

    def clock(self):
        value = self.clocks[min(self.reads, len(self.clocks) - 1)]
        self.reads += 1
        return value


def install(monkeypatch, gpus, init_error=None):
    """nvidia-ml-py's device functions answer from `gpus` (FakeGpu list)."""
    def init():
        if init_error is not None:
            raise pynvml.NVMLError(init_error)

    def util_samples(handle, since_us):
        stamp = 1_000 * (handle.reads + 1)
        if stamp <= since_us:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return [types.SimpleNamespace(pid=pid, timeStamp=stamp, smUtil=60 + k, memUtil=0, encUtil=0, decUtil=0)
                for k, pid in enumerate(handle.pids)]

    def by_index(i):
        if not 0 <= i < len(gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpus[i]

    def sm_only(read):
        def call(handle, kind):
            assert kind == pynvml.NVML_CLOCK_SM
            return read(handle)
        return call

    for name, fn in {
        "nvmlInit": init,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": by_index,
        "nvmlDeviceGetMaxClockInfo": sm_only(lambda h: h.max_clock),
        "nvmlDeviceGetClockInfo": sm_only(FakeGpu.clock),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: h.reasons,
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(gpu=97, memory=40),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [types.SimpleNamespace(pid=p, usedGpuMemory=1 << 30)
                                                           for p in h.pids],
        "nvmlDeviceGetProcessUtilization": util_samples,
    }.items():
        monkeypatch.setattr(pynvml, name, fn)


def test_a_sample_has_a_device_row_and_a_row_per_process_with_the_clock_ratio(monkeypatch):
    throttled = pynvml.nvmlClocksEventReasonSwPowerCap
    install(monkeypatch, [FakeGpu([1980]), FakeGpu([990], reasons=throttled)])
    sampler = NvmlSampler()
    rows = sampler.sample(0.5)
    sampler.close()
    assert [r.process for r in rows] == ["gpu0", "gpu0:4242", "gpu0:4343", "gpu1", "gpu1:4242", "gpu1:4343"]
    assert [r.speed for r in rows] == [1.0] * 3 + [0.5] * 3
    assert rows[3].throttle_reasons == throttled and rows[0].throttle_reasons == 0
    assert (rows[0].sm_util, rows[1].sm_util, rows[2].sm_util) == (97, 60, 61)


def test_process_utilisation_counts_only_samples_newer_than_the_last_read(monkeypatch):
    gpu = FakeGpu([1980])
    install(monkeypatch, [gpu])
    sampler = NvmlSampler()
    assert sampler.sample(0.0)[1].sm_util == 60
    gpu.reads -= 1                       # NVML has no newer sample: NOT_FOUND
    assert sampler.sample(0.1)[1].sm_util == 0


def test_record_nvml_writes_a_trace_that_replays_the_throttled_gpu(monkeypatch, tmp_path, capsys):
    install(monkeypatch, [FakeGpu([1980, 1980, 1485, 990, 1980])])
    out = tmp_path / "gpu.csv"
    assert cli_main(["record-nvml", "--out", str(out), "--interval-ms", "5", "--duration-s", "0.025"]) == 0
    assert "15 rows" in capsys.readouterr().out
    samples = read_trace(out, ["gpu0", "gpu0:4242", "gpu0:4343"])
    device = [s for s in samples if s.process == "gpu0"]
    assert [s.speed for s in device] == [1.0, 1.0, 0.75, 0.5, 1.0]
    times = [s.t_s for s in device]
    assert times == sorted(times) and times[-1] == pytest.approx(0.02, abs=0.015)
    line = timelines(samples, 0.0, 1.0)["gpu0"]
    assert line.speed_at(times[3]) == 0.5


@pytest.mark.parametrize("args, says", [
    (["--interval-ms", "0"], "--interval-ms must be 1..60000"),
    (["--duration-s", "-1"], "--duration-s must be within"),
    (["--gpu", "x"], "--gpu must be GPU indices"),
    (["--gpu", "3"], "no GPU 3 (this machine has 1)"),
])
def test_bad_record_nvml_arguments_exit_2_with_one_line_and_no_trace(monkeypatch, tmp_path, capsys, args, says):
    install(monkeypatch, [FakeGpu([1980])])
    out = tmp_path / "gpu.csv"
    assert cli_main(["record-nvml", "--out", str(out), "--duration-s", "0.01", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]
    assert list(tmp_path.iterdir()) == []


def test_no_driver_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    install(monkeypatch, [], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(NvmlUnavailable, match="NVML cannot start"):
        NvmlSampler()
    assert cli_main(["record-nvml", "--out", str(tmp_path / "gpu.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NVML cannot start" in err[0]
    assert list(tmp_path.iterdir()) == []
