"""`npu-doctor watch` (the daemon); `npu-doctor fix` is in fixcmd.py."""

from __future__ import annotations

import os
import sys

import click

from ..errors import ConfigError, HostError, SnapshotError
from .common import _fail, _open_host, config_loaded, host_options
from .fixcmd import fix  # noqa: F401  (re-exported: cli/__init__ imports it from here)


@click.command()
@host_options
@click.option("--interval", type=click.FloatRange(0.05, 3600), default=5.0, show_default=True,
              metavar="SECONDS", help="How often to sample temperatures, clocks, utilisation and runtime PM.")
@click.option("--check-interval", type=click.FloatRange(1, 86400), default=300.0, show_default=True,
              metavar="SECONDS", help="How often to re-run the whole check and log findings raised/cleared.")
@click.option("--inventory-interval", type=click.FloatRange(1, 86400), default=60.0, show_default=True,
              metavar="SECONDS", help="How often to look again for devices and thermal zones that "
                                      "appeared since start (also on every udev event).")
@click.option("--log-format", type=click.Choice(["journal", "json"]), default="journal", show_default=True,
              help="journal: `<4>event subject: message` lines for journald; json: one object per line.")
@click.option("--textfile-dir", metavar="DIR",
              help="Write npu_doctor.prom there for node_exporter's textfile collector "
                   "(Debian: /var/lib/prometheus/node-exporter); must be writable at start.")
@click.option("--listen", metavar="ADDR:PORT",
              help="Also serve the metrics at http://ADDR:PORT/metrics (e.g. 127.0.0.1:9435).")
def watch(snapshot, probe_dirs, rule_dirs, logs, interval, check_interval, inventory_interval, log_format,
          textfile_dir, listen):
    """Run as a daemon: log throttling, runtime suspend, hot-plug and CPU fallback as they happen.

    Logs transitions only (one line each), never one line per sample. Under systemd
    (Type=notify) it sends READY=1 after the first sample, WATCHDOG=1 after every completed
    sample, STATUS= lines, and STOPPING=1 on SIGTERM. SIGHUP reloads probes and rules; a bad
    new file is rejected (config-rejected) and the old configuration keeps running.

    \b
    Examples:
      npu-doctor watch --interval 1
      npu-doctor watch --log-format json --textfile-dir /var/lib/prometheus/node-exporter
      npu-doctor watch --listen 127.0.0.1:9435

    Under systemd (stdout is the journal: $JOURNAL_STREAM) events go to the journal with
    fields NPU_DOCTOR_EVENT, NPU_DOCTOR_SUBJECT, MESSAGE_ID and PRIORITY; on a terminal the
    lines have no `<N>` priority prefix.
    """
    from ..check import Config
    from ..sdnotify import Notifier, clean_child_environ
    from ..watch import Watcher

    probe_dirs, rule_dirs = list(probe_dirs), list(rule_dirs)
    notifier = Notifier()
    clean_child_environ()
    if textfile_dir and not os.path.isdir(textfile_dir):
        _fail(f"--textfile-dir {textfile_dir}: no such directory")
    snapshot_metrics = None
    if textfile_dir or listen:
        from ..watch import metrics
        try:
            import prometheus_client  # noqa: F401  (only to say what is missing)
        except ImportError:
            _fail("--textfile-dir and --listen need prometheus-client: pip install 'npu-doctor[watch]'")
    if textfile_dir:
        try:
            metrics.check_writable(textfile_dir)
        except OSError as e:
            _fail(f"--textfile-dir {textfile_dir}: cannot write there ({e.strerror or e})")
    if listen:
        snapshot_metrics = metrics.Snapshot()
        try:
            metrics.serve(listen, snapshot_metrics)
        except ValueError as e:
            _fail(str(e))
        except OSError as e:
            _fail(f"--listen {listen}: {e.strerror or e}")
    try:
        config = Config.load(probe_dirs, rule_dirs)
        config_loaded()
        host = _open_host(snapshot, list(logs))
    except (ConfigError, SnapshotError, HostError) as e:
        _fail(str(e))
    from ..watch.journal import JournalSender, stream_is_journal

    journal = JournalSender() if stream_is_journal() else None
    watcher = Watcher(host, config, interval, check_interval, log_format=log_format,
                      textfile_dir=textfile_dir,
                      reload_config=lambda: Config.load(probe_dirs, rule_dirs), notifier=notifier,
                      journal=journal, prefix=not sys.stdout.isatty(), snapshot=snapshot_metrics,
                      inventory_interval=inventory_interval)
    watcher.install_signals()
    sys.exit(watcher.run())
