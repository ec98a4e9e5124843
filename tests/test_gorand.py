"""Go's math/rand stream, value for value: the recomputed rngCooked table and each method's draw pattern,
checked against outputs Go itself prints (Go's regression golden values for seed 0, and the well-known
first values of the pre-1.20 global source, seed 1)."""

from __future__ import annotations

from dralab.replay.traces.gorand import LEN, MASK63, GoRand, cooked


def test_cooked_table_has_go_first_and_last_values() -> None:
    table = cooked()
    assert len(table) == LEN
    # rng.go's table (the 63-bit version is the low 63 bits of gen_cooked.go's 64-bit one)
    assert table[0] & MASK63 == 5041579894721019882
    assert table[1] & MASK63 == 4646389086726545243
    assert table[-1] & MASK63 == 4152330101494654406


def test_seed_one_matches_the_old_global_source() -> None:
    assert GoRand(1).int_() == 5577006791947779410
    r = GoRand(1)
    assert [r.intn(100) for _ in range(5)] == [81, 87, 47, 59, 81]


def test_seed_zero_int63_golden() -> None:
    r = GoRand(0)
    assert [r.int63() for _ in range(3)] == [8717895732742165505, 2259404117704393152, 6050128673802995827]


def test_seed_zero_rejection_methods_golden() -> None:
    r = GoRand(0)
    sizes = [1, 10, 32, 1 << 20, (1 << 20) + 1, 1_000_000_000, 1 << 30, (1 << 31) - 2, (1 << 31) - 1]
    got = [r.int31n(sizes[i % len(sizes)]) for i in range(11)]
    assert got == [0, 4, 25, 310570, 857611, 621654496, 413258767, 1407315077, 1926657288, 0, 8]
    r = GoRand(0)
    big = [1, 10, 32, 1 << 20, (1 << 20) + 1, 1_000_000_000, 1 << 30, (1 << 31) - 2, (1 << 31) - 1,
           10**18, 1 << 60, (1 << 63) - 2, (1 << 63) - 1]
    assert [r.intn(big[i % len(big)]) for i in range(16)] == [
        0, 4, 25, 310570, 857611, 621654496, 413258767, 1407315077, 1926657288,
        543572285742637646, 355889821886249464, 8325060299420976708, 7837839688282259259, 0, 2, 14]


def test_seed_zero_float64_and_uint32_golden() -> None:
    r = GoRand(0)
    assert [r.float64() for _ in range(2)] == [0.9451961492941164, 0.24496508529377975]
    r = GoRand(0)
    assert [r.uint32() for _ in range(2)] == [4059586549, 1052117029]


def test_seed_zero_perm_golden() -> None:
    r = GoRand(0)
    sizes = [0, 1, 5, 8, 9, 10, 16]
    got = [r.perm(sizes[i % len(sizes)]) for i in range(9)]
    assert got[2] == [0, 4, 1, 3, 2]
    assert got[6] == [14, 2, 0, 8, 3, 5, 13, 12, 1, 4, 6, 7, 11, 9, 15, 10]
    assert got[8] == [0]


def test_shuffle_is_a_permutation_and_seeded() -> None:
    a, b = list(range(100)), list(range(100))
    GoRand(42).shuffle(a)
    GoRand(42).shuffle(b)
    assert a == b and sorted(a) == list(range(100)) and a != list(range(100))
    r = GoRand(42)
    r.shuffle(list(range(100)))
    assert r.draws == 99  # one Uint32 per swap unless Lemire's rejection fires (it does not here)
