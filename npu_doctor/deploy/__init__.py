"""Deployment: the systemd service (`service install`), Node Problem Detector output and
configs (`check --format npd`, `python -m npu_doctor.deploy.npd`)."""
