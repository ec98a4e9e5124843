"""`pod_requests` is memoised by the spec fields it reads: the memo never changes an answer, never leaks
a shared dict, and falls back to computing when the spec cannot be a key."""

from __future__ import annotations

from typing import Any

from dralab.core.kube.resources import _pod_requests, pod_requests


def spec(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": fields}


CASES = [
    spec(containers=[{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "3Gi"}}}]),
    spec(containers=[{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": 0.5}}}]),
    spec(containers=[{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
         initContainers=[{"name": "i", "resources": {"requests": {"cpu": "2"}}},
                         {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "300m"}}}],
         overhead={"cpu": "50m"}),
    spec(containers=[{"name": "a"}], resources={"requests": {"cpu": "4"}, "limits": {"memory": "1Gi"}}),
    spec(containers=None),
    {"metadata": {"name": "no-spec"}},
]


def test_the_memo_gives_the_computed_answer() -> None:
    for case in CASES * 2:  # the second time from the memo
        assert pod_requests(case) == _pod_requests(case)


def test_callers_get_their_own_dict() -> None:
    first = pod_requests(CASES[0])
    first["cpu"] = -1
    assert pod_requests(CASES[0])["cpu"] == 1000


def test_a_spec_that_cannot_be_a_key_is_computed() -> None:
    odd = spec(containers=[{"name": "a", "resources": {"requests": {"cpu": "1"}}}], overhead={1: "2"})
    assert pod_requests(odd) == _pod_requests(odd)
