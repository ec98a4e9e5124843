"""How fast DRA CEL selectors are: compile, activation (a device's CEL variables), cold evaluation, cached.

Run: python benchmarks/cel_bench.py [--devices N]

Devices look like real GPU devices (a dozen attributes including a version, two capacities). The
expressions are the typical upstream ones. "cold" is the first evaluation of an (expression, device)
pair once the device's activation exists; "cached" is every later call for the same pair; "raw" is
cel-rust's Program.execute alone on the same activation, the floor under the matcher's own work.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from fractions import Fraction

from dralab.core.dra.cel import CelMatcher
from dralab.core.dra.model import Attribute, Capacity, Device, DeviceID

EXPRESSIONS = {
    "driver ==": 'device.driver == "gpu.example.com"',
    "bool attribute": 'device.attributes["gpu.example.com"].mig',
    "startsWith": 'device.attributes["gpu.example.com"].model.startsWith("A100")',
    "domain in": '"resource.kubernetes.io" in device.attributes',
    "quantity compareTo": 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    "semver + quantity": (
        'device.attributes["gpu.example.com"].driverVersion.major() >= 1 && '
        'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("1Mi"))'
    ),
    "has() unknown domain": 'has(device.attributes["other.example.com"].x)',
    "cel.bind": 'cel.bind(a, device.attributes["gpu.example.com"], a.model.startsWith("A") && a.index < 4)',
}


def make_devices(n: int) -> list[Device]:
    devices = []
    for i in range(n):
        attributes = {
            "gpu.example.com/model": Attribute("string", "A100-80GB" if i % 2 else "H100-80GB"),
            "gpu.example.com/index": Attribute("int", i % 8),
            "gpu.example.com/mig": Attribute("bool", i % 3 == 0),
            "gpu.example.com/driverVersion": Attribute("version", f"1.{i % 5}.0"),
            "gpu.example.com/uuid": Attribute("string", f"GPU-{i:08x}"),
            "gpu.example.com/numa": Attribute("int", i % 2),
            "gpu.example.com/nvlink": Attribute("string", f"domain-{i % 4}"),
            "gpu.example.com/productName": Attribute("string", "NVIDIA A100-SXM4-80GB"),
            "gpu.example.com/architecture": Attribute("string", "Ampere"),
            "gpu.example.com/cudaComputeCapability": Attribute("version", "8.0.0"),
            "resource.kubernetes.io/pcieRoot": Attribute("string", f"pci0000:{i % 4:02x}"),
        }
        capacity = {
            "gpu.example.com/memory": Capacity(Fraction(80 * 2**30)),
            "gpu.example.com/multiprocessors": Capacity(Fraction(108)),
        }
        devices.append(Device(DeviceID("gpu.example.com", f"node-{i // 8}", f"gpu-{i % 8}"), f"slice-{i // 8}",
                              attributes, capacity))
    return devices


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2000)
    args = parser.parse_args()
    logging.getLogger("cel").setLevel(logging.ERROR)  # cel-rust logs every failing Python callback
    n = args.devices
    devices = make_devices(n)

    matcher = CelMatcher()
    compile_us = {}
    for name, expr in EXPRESSIONS.items():
        def compile_one(e: str = expr) -> None:
            matcher.compile(e, "bench")

        compile_us[name] = per_call_us(compile_one, 1)

    def activate() -> None:
        for d in devices:
            matcher.matches("true", d, "bench")

    activation_us = per_call_us(activate, n)

    rows = []
    for name, expr in EXPRESSIONS.items():
        def run(e: str = expr) -> None:
            for d in devices:
                matcher.matches(e, d, "bench")

        cold = per_call_us(run, n)
        cached = min(per_call_us(run, n) for _ in range(3))
        compiled = matcher._compiled[expr].program  # noqa: SLF001 - measuring the library alone
        contexts = [matcher._devices[d].context for d in devices]  # noqa: SLF001

        def raw(p: object = compiled, cs: list[object] = contexts) -> None:
            for c in cs:
                p.execute(c)  # type: ignore[attr-defined]

        raw_us = min(per_call_us(raw, n) for _ in range(3))
        rows.append((name, compile_us[name], cold, cached, raw_us))

    print(f"DRA CEL selectors, {n} devices x {len(EXPRESSIONS)} expressions (µs per call)")
    print(f"activation (a device's CEL variables, once per device): {activation_us:.1f} µs")
    print()
    header = f"{'expression':<22} {'compile':>8} {'cold eval':>10} {'cached':>8} {'raw exec':>9}"
    print(header)
    print("-" * len(header))
    for name, c, cold, cached, raw_us in rows:
        print(f"{name:<22} {c:>8.1f} {cold:>10.2f} {cached:>8.2f} {raw_us:>9.2f}")
    print()
    print(f"stats: {matcher.stats}")


if __name__ == "__main__":
    main()
