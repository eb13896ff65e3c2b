"""Lambda function binaries timed from process start to their first request for work.

    python3 tests/tools/startup.py [--runs N] [--copies C] BINARY...

Each binary runs under a stub of the Lambda Runtime API (one listener per process) with the
settings a deployment on KMS gives it, and is timed from just before its process is spawned
to the moment its `GET .../runtime/invocation/next` arrives: everything a cold start does
before the first event can be handed over. The stub answers nothing, so no AWS call is made
(none is due before the first event) and no emulator is needed. Two figures per binary, the
median over N runs (5 by default): started alone, and started at once with every other
binary given (C copies of each, 2 by default: six binaries make the twelve processes of a
deployment's cold start).
"""

import os
import socket
import statistics
import subprocess
import sys
import threading
import time

ENV = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "HEGEMONY_TF_STATE_TABLE": "startup",
    "HEGEMONY_TF_STATE_BUCKET": "startup",
    "HEGEMONY_TF_STATE_KEY_BACKEND": "kms:alias/startup",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    "AWS_LAMBDA_LOG_STREAM_NAME": "startup",
    "RUST_LOG": "info",
}


def start(binary):
    """Spawns `binary` under its own stub runtime API; returns (process, thread, result)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    name = os.path.basename(binary)
    env = dict(os.environ, **ENV)
    env.update({
        "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:%d" % listener.getsockname()[1],
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/" + name,
    })
    result = {}

    def wait():
        conn, _ = listener.accept()
        seen = b""
        while b"\r\n" not in seen:
            chunk = conn.recv(4096)
            if not chunk:
                break
            seen += chunk
        result["ready"] = time.perf_counter()
        result["line"] = seen.split(b"\r\n")[0].decode()
        # Held open, unanswered, until the process is stopped.
        result["conn"] = conn
        listener.close()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    started = time.perf_counter()
    process = subprocess.Popen([binary], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    result["started"] = started
    return process, thread, result


def finish(process, thread, result, binary):
    thread.join(30)
    process.kill()
    _, stderr = process.communicate()
    if "ready" not in result or "/runtime/invocation/next" not in result.get("line", ""):
        sys.exit("%s never asked for work:\n%s" % (binary, stderr.decode(errors="replace")))
    return (result["ready"] - result["started"]) * 1000.0


def main():
    args = sys.argv[1:]
    runs, copies = 5, 2
    while args and args[0].startswith("--"):
        flag, value = args[0], int(args[1])
        args = args[2:]
        if flag == "--runs":
            runs = value
        elif flag == "--copies":
            copies = value
        else:
            sys.exit("unknown flag " + flag)
    if not args:
        sys.exit(__doc__)
    alone = {b: [] for b in args}
    together = {b: [] for b in args}
    for _ in range(runs):
        for binary in args:
            alone[binary].append(finish(*start(binary), binary))
        started = [(b, start(b)) for b in args for _ in range(copies)]
        for binary, run in started:
            together[binary].append(finish(*run, binary))
    print("process start to first /next, median of %d runs (ms); at once: %d processes"
          % (runs, len(args) * copies))
    print("%16s  %8s  %8s" % ("binary", "alone", "at once"))
    for binary in args:
        print("%16s  %8.1f  %8.1f" % (os.path.basename(binary),
                                      statistics.median(alone[binary]),
                                      statistics.median(together[binary])))


if __name__ == "__main__":
    main()
