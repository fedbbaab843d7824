"""The supervisor: the one process that talks to the host; it never runs program or test code.

Protocol on stdin/stdout, length-prefixed frames: the host sends a job frame and, right behind it, a frame with a
fresh random nonce. The supervisor reads exactly the job frame, forks a judge (which forks the program process), waits
for the verdicts, kills every process the run left behind, cleans the work dir, and only *then* reads the nonce and
answers ``nonce + "\\n" + verdict``. While any untrusted code is alive the nonce sits unread in the kernel's pipe
buffer, out of every process's memory; judge and program processes close the supervisor's descriptors before running
anything, and the supervisor is non-dumpable, so they cannot reach its descriptors through /proc either. A verdict
without the right nonce is rejected by the host.
"""


import contextlib
import os
import select
import signal
import sys
import time

from llm_marl_envs.sandbox.harness.codec import FRAME_HEADER, dumps, loads, read_frame, write_frame  # harness-import
from llm_marl_envs.sandbox.harness.judge import judge_main  # harness-import
from llm_marl_envs.sandbox.harness.program import PRELOAD  # harness-import

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
MAX_REPORT_BYTES = 4 * 1024 * 1024


def harden_self():
    """Non-dumpable (no ptrace, no /proc/PID/fd or mem access by same-uid processes) and a subreaper for orphans."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 and libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, ImportError, AttributeError):
        return False


def children_of(pid):
    """PIDs whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 1 and int(fields[1]) == pid:
                found.append(int(entry))
    return found


def reap():
    """Collect every exited child (orphans are ours: we are a subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep(sweep_all):
    """Kill everything the run left behind; return how many processes were still alive after 2 s of trying."""
    me, deadline = os.getpid(), time.monotonic() + 2.0
    while True:
        if sweep_all:  # in a container: every process of our uid but us and init
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)
        for pid in children_of(me):
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        reap()
        left = [p for p in children_of(me)] if not sweep_all else others(me)
        if not left or time.monotonic() > deadline:
            return len(left)
        time.sleep(0.005)


def others(me):
    """Processes in this PID namespace besides init, us and zombies (used only inside a container)."""
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (1, me):
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z":
                alive.append(int(entry))
    return alive


def wipe(path):
    """Empty the work dir; return what could not be removed."""
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files + dirs:
            full = os.path.join(root, name)
            try:
                if os.path.isdir(full) and not os.path.islink(full):
                    os.chmod(full, 0o700)
                    os.rmdir(full)
                else:
                    os.unlink(full)
            except OSError:
                try:
                    os.chmod(root, 0o700)
                    os.unlink(full) if not os.path.isdir(full) else os.rmdir(full)
                except OSError:
                    pass
    return os.listdir(path)


def collect(report_r, deadline):
    """Read the judge's frames until its end frame, end of file or the deadline; return (frames, timed_out)."""
    buffer, frames = b"", []
    os.set_blocking(report_r, False)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return frames, True
        readable, _, _ = select.select([report_r], [], [], remaining)
        if not readable:
            continue
        try:
            chunk = os.read(report_r, 65536)
        except BlockingIOError:
            continue
        if not chunk:
            return frames, False
        buffer += chunk
        if len(buffer) > MAX_REPORT_BYTES:
            return frames, False
        while len(buffer) >= FRAME_HEADER.size:
            (size,) = FRAME_HEADER.unpack(buffer[: FRAME_HEADER.size])
            if len(buffer) < FRAME_HEADER.size + size:
                break
            frames.append(loads(buffer[FRAME_HEADER.size : FRAME_HEADER.size + size]))
            buffer = buffer[FRAME_HEADER.size + size :]
            if frames[-1].get("end"):
                return frames, False


def run_job(job, config):
    """Fork a judge for one job, gather its verdicts, clean up; return the verdict document."""
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.closerange(3, report_w)
            os.closerange(report_w + 1, 1024)
            if config.get("drop_uid") is not None:
                os.setgroups([])
                os.setgid(int(config["drop_gid"]))
                os.setuid(int(config["drop_uid"]))
            judge_main(job, report_w)
        finally:
            os._exit(0)
    os.close(report_w)
    frames, overran = collect(report_r, time.monotonic() + float(job["run_budget_s"]) + 2.0)
    os.close(report_r)
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        status = -1
    anomalies = []
    stray = sweep(bool(config.get("sweep_all")))
    if stray:
        anomalies.append(f"{stray} processes survived the sweep")
    left = wipe(config["workdir"])
    if left:
        anomalies.append("work dir not clean: {}".format(", ".join(sorted(left)[:5])))
    if overran:
        anomalies.append("the judge overran the run budget and was killed")
    end = next((f for f in frames if f.get("end")), None)
    if end is None and not overran:
        anomalies.append(f"the judge exited without its end frame (status {status})")
    outcomes = {
        f["i"]: [f["s"], f["m"], f["x"]] if isinstance(f.get("x"), dict) else [f["s"], f["m"]]
        for f in frames
        if not f.get("end") and isinstance(f.get("i"), int)
    }
    return {"outcomes": outcomes, "end": end, "overran": overran, "anomalies": anomalies}


def supervisor_main():
    """Serve jobs until stdin closes. ``sys.argv[1]`` is a JSON config (workdir, sweep_all, drop_uid/gid)."""
    config = loads(sys.argv[1].encode()) if len(sys.argv) > 1 else {}
    config.setdefault("workdir", os.getcwd())
    hardened = harden_self()
    if config.get("drop_uid") is not None:
        for name in PRELOAD:
            with contextlib.suppress(ImportError):
                __import__(name)
    os.chdir(config["workdir"])
    while True:
        raw = read_frame(0)
        if raw is None:
            return
        result = run_job(loads(raw), config)
        if not hardened:
            result["anomalies"].append("could not make the supervisor non-dumpable")
        nonce = read_frame(0)
        if nonce is None:
            return
        write_frame(1, nonce + b"\n" + dumps(result))
