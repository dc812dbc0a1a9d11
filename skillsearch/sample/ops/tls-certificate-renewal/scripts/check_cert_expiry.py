#!/usr/bin/env python3
"""Print days until TLS certificate expiry for HOST[:PORT] arguments.
Usage: check_cert_expiry.py HOST[:PORT] [...] [--warn-days N]
Exit status 1 if any certificate fails or expires within the warning window."""
import argparse
import socket
import ssl
import sys
from datetime import UTC, datetime


def check(target: str, timeout: float = 5.0) -> tuple[datetime, list[str]]:
    host, _, port = target.partition(":")
    ctx = ssl.create_default_context()
    with socket.create_connection((host, int(port or 443)), timeout=timeout) as sock:
        with ctx.wrap_socket(sock, server_hostname=host) as tls:
            cert = tls.getpeercert()
    if not cert:
        raise ssl.SSLError(f"{target}: no certificate presented")
    expires = datetime.fromtimestamp(ssl.cert_time_to_seconds(str(cert["notAfter"])), UTC)
    sans = [value for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"]
    return expires, sans


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("targets", nargs="+")
    ap.add_argument("--warn-days", type=int, default=21)
    args = ap.parse_args()
    bad, now = 0, datetime.now(UTC)
    for target in args.targets:
        try:
            expires, sans = check(target)
        except (OSError, ssl.SSLError) as exc:
            print(f"FAIL  {target}: {exc}")
            bad += 1
            continue
        days = (expires - now).days
        flag = "WARN" if days < args.warn_days else "OK  "
        bad += flag == "WARN"
        print(f"{flag}  {target}: expires {expires:%Y-%m-%d} ({days} days) SAN={','.join(sans)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
