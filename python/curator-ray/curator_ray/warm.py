"""Warm workers: Ray actors that each keep one `curator-host serve` running, so that a shard
task is a request to a host that already has its plugins compiled, its stage instances
started and its models loaded, not a new process that starts them all again.

An actor reserves what one task of the phase reserves (`policy.task_resources`: cores, GPU
share, memory), so a pool of them places like the tasks did: one per slot the cluster has
room for, per GPU for a GPU stage. The driver hands each idle actor the next task; a task
that fails is given again (to any actor) up to `max_retries` times, and an actor lost with
its node is replaced, its task given again, exactly as Ray reruns a task lost with its node.
Its `curator-host serve` dies with the actor (PR_SET_PDEATHSIG), so a lost node's shard never
runs twice at once; every task is idempotent on the curator side.
"""

import collections
import json
import os
import socket
import subprocess
import tempfile
import time

from curator_ray import driver

# How long an actor waits for its curator-host to listen.
START_S = 120
# What a test sets to see tasks start (a file per request in this directory, then a pause),
# so that it can take a node away while one runs.
TEST_STARTED = "CURATOR_RAY_TEST_STARTED"


class ServeFailed(driver.ShardFailed):
    """An actor's `curator-host serve` that would not start; says why (its log's tail)."""

    def __str__(self):
        return f"{super().__str__()}:\n{self.log}"

    def __reduce__(self):
        return (ServeFailed, (self.argv, self.code, self.log))


class Server:
    """The body of a warm-worker actor: one `curator-host serve` for the actor's life (started
    again if it dies between tasks)."""

    def __init__(self, curator):
        self.curator = driver.resolve(curator)
        self.dir = tempfile.mkdtemp(prefix="curator-serve-")
        if len(self.dir) > 90:  # a Unix socket's path has ~107 bytes
            self.dir = tempfile.mkdtemp(prefix="curator-serve-", dir="/tmp")
        self.sock = os.path.join(self.dir, "serve.sock")
        self.log = os.path.join(self.dir, "serve.log")
        self.proc = None
        self._start()

    def _start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.curator, "serve", "--socket", self.sock],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=driver._die_with_parent,
            )
        deadline = time.time() + START_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise ServeFailed([self.curator, "serve"], self.proc.returncode, self._log_tail())
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock)  # listening (a connection that sends nothing is dropped)
                return
            except OSError:
                time.sleep(0.02)
        self.proc.kill()
        raise ServeFailed([self.curator, "serve"], 1, f"curator-host serve did not listen within {START_S} s")

    def _log_tail(self):
        try:
            with open(self.log, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log) - 6000))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def where(self):
        """Which node and process this actor is (answered once it is placed and listening)."""
        return {"node": os.uname().nodename, "pid": os.getpid()}

    def run(self, argv):
        """One `curator-host run` (argv[0] is the binary, ignored: the server's own runs it) as
        a request; the same answer and failures as `driver.run_curator`."""
        hook = os.environ.get(TEST_STARTED)
        if hook:
            open(os.path.join(hook, f"{os.getpid()}-{time.time()}"), "w").close()
            time.sleep(2)
        if self.proc.poll() is not None:
            self._start()
        started = time.time()
        request = json.dumps({"argv": list(argv[1:]), "cwd": os.getcwd()}) + "\n"
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(self.sock)
                s.sendall(request.encode())
                line = s.makefile("rb").readline()
            reply = json.loads(line)
        except (OSError, ValueError) as e:
            # The server died under the request: the next request starts a new one.
            self.proc.wait()
            raise driver.ShardFailed(argv, 1, f"curator-host serve died ({e}; exit {self.proc.returncode}):\n{self._log_tail()}") from None
        log = (reply["stdout"][-3000:] + reply["stderr"][-6000:]).strip()
        if reply["code"] == 2:
            raise driver.ShardInvalid(argv, 2, log)
        if reply["code"] != 0:
            raise driver.ShardFailed(argv, reply["code"], log)
        return {
            "started": started,
            "finished": time.time(),
            "node": os.uname().nodename,
            "pid": os.getpid(),
            "log": reply["stdout"][-2000:],
            "kept": reply["kept"],
        }


def capacity(res, nodes):
    """How many actors of `res` the alive nodes of `nodes` (`ray.nodes()`) hold at once, each
    node counted on its own: a slot never spans nodes."""
    total = 0
    for node in nodes:
        if not node.get("Alive"):
            continue
        have = node.get("Resources", {})
        fits = []
        for key, want in (("CPU", res["num_cpus"]), ("GPU", res["num_gpus"]), ("memory", res["memory"])):
            if want:
                fits.append(int(have.get(key, 0) // want + 1e-9))
        total += min(fits) if fits else 1
    return total


def shape(res):
    return (res["num_cpus"], res["num_gpus"], res["memory"])


class Lost(Exception):
    """A task that failed on its last attempt: its index and the cause."""

    def __init__(self, index, cause):
        super().__init__(str(cause))
        self.index, self.cause = index, cause


class Pool:
    """Warm-worker actors of one resource shape."""

    def __init__(self, res, curator, size):
        import ray

        self.res, self.curator = res, curator
        self.actor_class = ray.remote(Server)
        self.waiting = {}  # ref of an actor's `where` -> actor, until it answers
        self.idle = []
        for _ in range(max(1, size)):
            self._add()

    def _add(self):
        opts = dict(self.res, max_restarts=0, max_concurrency=1)
        actor = self.actor_class.options(**opts).remote(self.curator)
        self.waiting[actor.where.remote()] = actor

    def size(self):
        return len(self.waiting) + len(self.idle)

    def grow(self, size):
        while self.size() < size:
            self._add()

    def run(self, argvs, max_retries, done):
        """Run every command of `argvs` on the pool's actors; `done(i, result, submitted)` as each
        finishes. Raises Lost for a task that failed `max_retries` + 1 times (or was refused)."""
        import ray

        queue = collections.deque((i, 0) for i in range(len(argvs)))
        inflight = {}
        # Actors that never started: a few are lost nodes; more than that is a host that
        # cannot serve (a broken binary, say), reported with the first waiting task.
        start_failures = 0
        while queue or inflight:
            while self.idle and queue:
                i, attempt = queue.popleft()
                actor = self.idle.pop()
                inflight[actor.run.remote(argvs[i])] = (actor, i, attempt, time.time())
            if not inflight and not self.waiting:
                self._add()
            [ref], _ = ray.wait(list(inflight) + list(self.waiting), num_returns=1)
            if ref in self.waiting:
                actor = self.waiting.pop(ref)
                try:
                    ray.get(ref)
                    self.idle.append(actor)
                except Exception as e:  # it never started (its node died, its curator-host failed)
                    ray.kill(actor, no_restart=True)
                    start_failures += 1
                    if start_failures > max_retries + self.size() and queue:
                        self._give_up(inflight, queue[0][0], getattr(e, "cause", None) or e)
                    self._add()
                continue
            actor, i, attempt, submitted = inflight.pop(ref)
            try:
                r = ray.get(ref)
            except Exception as e:
                cause = getattr(e, "cause", None) or e
                if isinstance(cause, driver.ShardFailed):
                    self.idle.append(actor)  # curator-host failed; the actor is fine
                else:  # the actor is gone (its node, its process): a new one takes its place
                    ray.kill(actor, no_restart=True)
                    self._add()
                if isinstance(cause, driver.ShardInvalid) or attempt >= max_retries:
                    self._give_up(inflight, i, cause)
                queue.append((i, attempt + 1))
                continue
            self.idle.append(actor)
            done(i, r, submitted)

    @staticmethod
    def _give_up(inflight, i, cause):
        """Stop the actors still running tasks, and report task `i` lost with `cause`."""
        import ray

        for other, *_ in inflight.values():
            ray.kill(other, no_restart=True)
        raise Lost(i, cause)

    def kill(self):
        import ray

        for actor in list(self.waiting.values()) + self.idle:
            ray.kill(actor, no_restart=True)
        self.waiting, self.idle = {}, []
