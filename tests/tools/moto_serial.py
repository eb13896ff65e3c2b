"""The AWS emulator (moto) for the tests, answering one request at a time.

moto's DynamoDB TransactWriteItems rolls a cancelled transaction back by putting back a copy
of each table it took before it began. Under moto's threaded server, a write committed by
another request in between is undone with it: two sweepers at once lost each other's
deletes, and the suite failed now and then on a loaded machine. DynamoDB's own transactions
are isolated; a lock around each request makes moto's so too. Connections stay threaded (and
kept alive), so a client holding one idle never blocks another.

Usage: python3 moto_serial.py PORT   (with the tools' Python, which has moto)
"""

import os
import sys
import threading

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)


def main() -> None:
    port = int(sys.argv[1])
    # moto builds some answers (S3 addresses, SQS queue URLs) from it, as its own main does.
    os.environ.setdefault("MOTO_PORT", str(port))
    moto = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()

    def serial(environ, start_response):
        with one_at_a_time:
            # The whole answer is made under the lock: moto may do its work lazily, as the
            # body is read.
            return list(moto(environ, start_response))

    run_simple(
        "127.0.0.1",
        port,
        serial,
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
