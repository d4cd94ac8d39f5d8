"""Accelerator inventory from sysfs, and the Rockchip RKNPU debugfs files.

Collector `accelerators` (probe spec and detection tables: probes/accelerators.toml) finds:

- PCI devices (`/sys/bus/pci/devices/*`) whose class starts with a listed prefix (0x12,
  processing accelerator) or whose `vendor:device` / vendor+class is in the tables;
- class devices: `/sys/class/accel/accel*`, `/sys/class/apex/apex_*` (Coral),
  `/sys/class/hailo_chardev/hailo*` and `/sys/class/hailo1x/h1x-*`, and DRM render nodes `/sys/class/drm/renderD*` of a device
  already found;
- platform NPUs: platform devices whose `of_node/compatible` is in the table
  (`rockchip,rk3588-rknpu` at fdab0000.npu ...);
- NPU devfreq devices (`/sys/class/devfreq/*`) whose device is listed by name
  (`27700000.npu`), for captures that hold nothing else.

Each becomes one `accelerators[]` record (docs/architecture.md): vendor, name, index, pci_address
("0000:5a:00.0"), pci_id ("8086:7d1d"), sysfs (realpath of the device directory), driver.name
(basename of the `driver` link), driver.version (`driver/module/version`), numa_node, dev (the
main /dev node), dev_nodes [{path, type, mode "0660", uid, gid, group, can_open, exists}],
access {can_open, path, mode, owner, group, user, udev_rule} (when a node was checked),
power {control, runtime_status, autosuspend_delay_ms, runtime_suspended_time_ms,
runtime_active_time_ms} from `<device>/power/`, pcie {cur_speed_gts, max_speed_gts, cur_width,
max_width}, freq.devfreq (the devfreq class path; freq.devfreq_name, cur_hz ... are filled by
the `link_devfreq` deriver),
driver.bound (true when the `driver` link or anything only a bound driver creates exists:
a class device, debugfs, a devfreq device), udev.match (udev match keys for this device, used
by the persistent fixes), sensors.temperature {available, zone_types, path, reading_invalid,
raw_c}; for a sensor on the class device (Coral apex) temperature_c, trip_points_c (the
driver's plausible throttle trips, °C) and throttle_trip_c (the highest trip reached); a
reading outside -40..200 °C is no temperature_c but reading_invalid with raw_c.

Collector `rknpu_debugfs` reads `version` and `load` of the RKNPU driver (debugfs or procfs)
-> `drivers.rknpu.version`, the rknpu accelerator's driver.version, load {cores_percent,
max_percent, mean_percent} and utilization_percent. utilization_percent is the busiest core
(max, not mean): it answers "is the NPU doing work", and a model pinned to one core of the
three is not "33 % busy". A core over 100 % is an impossible reading (counter wrap after a hung
job): the raw values stay in load.cores_percent, utilization_percent is left unknown, and
sensor-reading-invalid reports it. With `--sample S` the load is read over the window and
utilization_percent is the mean of the per-read maxima.

Derivers (after all probes): `link_devfreq` copies devfreq.devices[] (device = realpath of
the parent device) onto the accelerator with the same sysfs -> freq.{cur_hz,min_hz,max_hz,
governor}; `link_thermal` takes temperature_c and thermal_zone from the thermal.zones[] entry
whose type is in the vendor's zone_types; `count_inventory` sets inventory.accelerator_count
only when the count is known (no vendor probe recorded `inventory.unknown[]` {vendor, reason}:
its tool failed, so the number of its devices is unknown).
"""

from __future__ import annotations

from ...probes import NoData, ProbeContext
from ...registry import collector
from .classes import scan_class_devices
from .devicetree import scan_devfreq, scan_devicetree_disabled, scan_platform
from .inventory import _Inventory, parse_link_speed  # noqa: F401  (parse_link_speed: public)
from .links import count_inventory, link_devfreq, link_thermal  # noqa: F401  (registered derivers)
from .nodes import finish_nodes
from .pci import scan_pci
from .rknpu import collect_rknpu_debugfs  # noqa: F401  (registered collector)


# -- collectors ---------------------------------------------------------------------------
@collector("accelerators")
def collect_accelerators(ctx: ProbeContext) -> None:
    inv = _Inventory(ctx)
    scan_pci(inv)
    scan_platform(inv)
    scan_class_devices(inv)
    scan_devfreq(inv)
    for key in list(inv.records):
        rec, srcs = inv.records[key], inv.sources[key]
        finish_nodes(inv, rec, srcs)
        info = inv.vendor_info(rec.get("vendor"))
        if info.get("driver") and rec.get("driver", {}).get("name") is None:
            rec.setdefault("driver", {})["expected"] = info["driver"]
        if info.get("thermal_zone_types") and "temperature_c" not in rec:
            rec.setdefault("sensors", {}).setdefault("temperature", {})["zone_types"] = list(
                info["thermal_zone_types"])
        if rec.get("driver", {}).get("bound") is None and rec.get("sysfs"):
            # a platform/PCI device with no `driver` link and nothing a driver creates
            rec.setdefault("driver", {})["bound"] = False
            srcs["driver.bound"] = f"{rec['sysfs']}/driver"
    if ctx.host.is_dir("/sys/bus") or ctx.host.is_dir("/sys/devices") or ctx.host.is_dir("/sys/class"):
        # only a host (or snapshot) that has sysfs can say "none": a snapshot of logs alone
        # leaves the count unknown
        ctx.facts.set("inventory.sysfs_scanned", True, "/sys")
    disabled = scan_devicetree_disabled(inv)
    if disabled:
        ctx.facts.set("inventory.disabled_in_devicetree", disabled, "/proc/device-tree")
    if not inv.records:
        raise NoData("no accelerator in sysfs (PCI class 0x12 or known ids, /sys/class/accel, "
                     "device tree, devfreq)")
    for key in sorted(inv.records, key=lambda k: (inv.records[k].get("pci_address") or "~", k)):
        rec = inv.records[key]
        ctx.facts.add_accelerator(rec, sources=inv.sources[key], source=key)
