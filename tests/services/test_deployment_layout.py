import pytest
from pydantic import ValidationError
from service_plans import two_context_plan

from caesar.errors import ConfigError
from caesar.services.ray_runtime.deployment import Deployment, partition_groups
from caesar.settings import RaySettings, Settings


def test_partition_groups_cover_every_partition_once():
    assert partition_groups(4, 1) == [(0, 1, 2, 3)]
    assert partition_groups(4, 2) == [(0, 2), (1, 3)]
    assert partition_groups(2, 4) == [(0,), (1,)]  # no actor without partitions
    for n, a in ((7, 3), (1, 1), (8, 8)):
        groups = partition_groups(n, a)
        assert sorted(j for g in groups for j in g) == list(range(n))


def test_actor_counts_per_service():
    """Settings' per-service counts override the default, the argument overrides both."""
    plan = two_context_plan()
    settings = Settings(ray=RaySettings(actors_per_service=2, actors={"deriver": 3}))
    assert Deployment(plan, settings).counts == {
        "scheduler": 2, "deriver": 3, "router": 2, "matcher": 2}
    assert Deployment(plan, settings, actors_per_service=1, actors={"matcher": 4}).counts == {
        "scheduler": 1, "deriver": 3, "router": 1, "matcher": 4}
    with pytest.raises(ConfigError, match="unknown service 'matchr'"):
        Deployment(plan, Settings(), actors={"matchr": 2})
    with pytest.raises(ConfigError, match="at least 1 actor"):
        Deployment(plan, Settings(), actors={"router": 0})
    with pytest.raises(ValidationError, match="unknown service 'matchr'"):
        RaySettings(actors={"matchr": 2})
    with pytest.raises(ValidationError, match="at least 1 actor"):
        RaySettings(actors={"matcher": 0})
