from caesar.services.ray_runtime.deployment import partition_groups


def test_partition_groups_cover_every_partition_once():
    assert partition_groups(4, 1) == [(0, 1, 2, 3)]
    assert partition_groups(4, 2) == [(0, 2), (1, 3)]
    assert partition_groups(2, 4) == [(0,), (1,)]  # no actor without partitions
    for n, a in ((7, 3), (1, 1), (8, 8)):
        groups = partition_groups(n, a)
        assert sorted(j for g in groups for j in g) == list(range(n))
