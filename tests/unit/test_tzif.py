"""A compiled zone file cut short anywhere, or not a zone at all, is an error naming the file:
never a hang (``zoneinfo`` alone reads a footer without its newline for ever) or a traceback."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from duetime.errors import InvalidInput
from duetime.support.tzif import read_zone, tzif_problem

ALMATY = resources.files("tzdata.zoneinfo").joinpath("Asia", "Almaty").read_bytes()


def test_a_whole_zone_file_reads() -> None:
    assert tzif_problem(ALMATY) is None


@pytest.mark.timeout(60)
def test_every_cut_of_a_zone_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "Almaty"
    for cut in range(len(ALMATY)):
        path.write_bytes(ALMATY[:cut])
        with pytest.raises(InvalidInput) as caught:
            read_zone(path, "Asia/Almaty")
        assert caught.value.field == "zoneinfo"
        assert str(path) in caught.value.message


def test_bytes_after_the_footer_and_a_bad_version_are_refused() -> None:
    assert tzif_problem(ALMATY + b"x") == "unexpected bytes after the footer"
    assert tzif_problem(ALMATY[:4] + b"9" + ALMATY[5:]) == "unknown TZif version b'9'"


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_zone(tmp_path, "Asia/Almaty")
    assert str(tmp_path) in caught.value.message
