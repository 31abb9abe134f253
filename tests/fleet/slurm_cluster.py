"""A one-node Slurm cluster on localhost for tests: munged, slurmctld and slurmd, each with its own
configuration, state and sockets in a temporary folder, started in the foreground as children of
this process and stopped (by their process ids) at the end. Needs root and Debian's slurm-wlm and
munge (tools/setup-debian.sh installs them); `Cluster.unavailable()` says why it cannot run.

  with Cluster() as c:          # raises ClusterError when a daemon does not come up
      subprocess.run(["sbatch", ...], env=c.env)
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

TOOLS = ["munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo"]


class ClusterError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def which(tool):
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin:/usr/bin")


class Cluster:
    @staticmethod
    def unavailable():
        """Why the cluster cannot run here, or None."""
        if os.geteuid() != 0:
            return "not root: slurmd must run as root to start jobs as their user"
        missing = [t for t in TOOLS if not which(t)]
        if missing:
            return f"missing {', '.join(missing)} (tools/setup-debian.sh installs slurm-wlm, munge)"
        return None

    def __init__(self, cpus=None):
        self.cpus = cpus or os.cpu_count() or 1
        self.dir = tempfile.mkdtemp(prefix="opfleet-slurm-")
        self.procs = []
        self.env = dict(os.environ)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def start_daemon(self, name, cmd):
        out = open(self.path(f"{name}.out"), "w")
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append((name, p))
        return p

    def log_tail(self, name, n=20):
        try:
            with open(self.path(f"{name}.out"), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        for d in ("munge", "state", "spool"):
            os.makedirs(self.path(d), mode=0o700)
        key, sock = self.path("munge", "munge.key"), self.path("munge", "munge.socket")
        subprocess.run([which("mungekey"), "--create", "--keyfile", key], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.chmod(key, 0o600)
        # --force: the temporary folder's permissions are not those of /etc/munge.
        self.start_daemon("munged", [which("munged"), "--foreground", "--force",
                                     f"--key-file={key}", f"--socket={sock}",
                                     f"--pid-file={self.path('munge', 'munged.pid')}",
                                     f"--log-file={self.path('munge', 'munged.log')}",
                                     f"--seed-file={self.path('munge', 'munged.seed')}"])
        self.wait_for(lambda: os.path.exists(sock), "munged", 20)
        host = socket.gethostname().split(".")[0]
        conf = self.path("slurm.conf")
        with open(conf, "w") as f:
            f.write(f"""# A one-node test cluster (tests/fleet/slurm_cluster.py).
ClusterName=opfleet-test
SlurmctldHost={host}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={self.path('state')}
SlurmdSpoolDir={self.path('spool')}
SlurmctldPidFile={self.path('slurmctld.pid')}
SlurmdPidFile={self.path('slurmd.pid')}
SlurmctldLogFile={self.path('slurmctld.log')}
SlurmdLogFile={self.path('slurmd.log')}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
        self.env["SLURM_CONF"] = conf
        self.start_daemon("slurmctld", [which("slurmctld"), "-D", "-i", "-f", conf])
        self.start_daemon("slurmd", [which("slurmd"), "-D", "-f", conf])

        def idle():
            r = subprocess.run([which("sinfo"), "-h", "-o", "%T"], env=self.env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            return r.returncode == 0 and r.stdout.strip() in ("idle", "mixed")
        self.wait_for(idle, "the node", 60)

    def wait_for(self, cond, what, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, p in self.procs:
                if p.poll() is not None:
                    raise ClusterError(f"{name} exited ({p.returncode}):\n{self.log_tail(name)}"
                                       f"{self.file_tail(name)}")
            if cond():
                return
            time.sleep(0.3)
        raise ClusterError(f"{what} did not come up in {timeout} s:\n" +
                           "".join(f"--- {n}\n{self.log_tail(n)}{self.file_tail(n)}"
                                   for n, _ in self.procs))

    def file_tail(self, name):
        logs = {"slurmctld": "slurmctld.log", "slurmd": "slurmd.log",
                "munged": os.path.join("munge", "munged.log")}
        try:
            with open(self.path(logs[name]), errors="replace") as f:
                return "".join(f.readlines()[-15:])
        except (OSError, KeyError):
            return ""

    def stop(self):
        # slurmd first (it ends the jobs' steps), then the controller, then munged.
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)
