"""The container's health check: the service answers GET /healthz with 200 (the store
is open and not known to be damaged). Exit status 0 when healthy, 1 otherwise.

    python healthcheck.py [URL]     URL: http://127.0.0.1:6060/healthz by default
"""

import sys
import urllib.error
import urllib.request

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6060/healthz"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the service is local: no proxy
try:
    with opener.open(url, timeout=4) as answer:
        healthy = answer.status == 200
        body = answer.read(2000).decode("utf-8", "replace")
except (urllib.error.URLError, OSError) as exc:
    healthy, body = False, str(exc)
print(body)
sys.exit(0 if healthy else 1)
