"""Scalar functions for models over positions, importable by path for
deployments (`functions={"km": "caesar.examples.geo:haversine_km"}` or the
settings' `functions:`); docs/python.md uses them."""

from __future__ import annotations

import math

EARTH_RADIUS_KM = 6371.0088  # mean radius (IUGG)


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in km between two points given in degrees."""
    if not (-90 <= lat1 <= 90 and -90 <= lat2 <= 90):
        raise ValueError(f"latitude out of range: {lat1}, {lat2}")
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))


def grid_cell(lat: float, lon: float, size_deg: float) -> str:
    """The name of the square grid cell of `size_deg` degrees holding a point."""
    return f"{math.floor(lat / size_deg)}:{math.floor(lon / size_deg)}"
