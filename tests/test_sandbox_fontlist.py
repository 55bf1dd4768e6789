"""The warm parent's matplotlib font list: built at a tier's first start, kept, and read by the next warm parent
(autograder.running.sandbox.zygote.FontlistCache); what a student's code sees of the fonts is the same either way."""

import json

import pytest

from autograder.running.sandbox import environment, tiers
from autograder.running.sandbox.process import Sandbox
from autograder.running.sandbox.zygote import Zygote
from grading_helpers import TEST_LIMITS

pytestmark = pytest.mark.slow

FONTS_SEEN = (
    "import io, matplotlib.font_manager as fm, matplotlib.pyplot as plt\n"
    "FONTS = sorted((f.fname, f.name, f.style, f.weight) for f in fm.fontManager.ttflist)\n"
    "fig = plt.figure(figsize=(2, 1), dpi=50)\nfig.text(0.1, 0.5, 'RMSNorm 均方根')\n"
    "buffer = io.BytesIO()\nfig.savefig(buffer, format='png', metadata={'Software': None})\n"
    "PNG = buffer.getvalue().hex()\n"
    "SEEN = (FONTS, PNG, fm.findfont('DejaVu Sans'))")


def started(tier: str, cache_path):
    zygote = Zygote(environment.locate(), tier)
    zygote.fontlists.path = cache_path
    return zygote.start()


def fonts_seen(zygote):
    box = Sandbox(environment.locate(), zygote.tier, TEST_LIMITS, zygote=zygote)
    box.start()
    try:
        reply = box.request({"op": "exec_cell", "source": FONTS_SEEN, "cell": 0}, None, 60)
        assert reply.ok, reply.error
        return box.request({"op": "variable", "name": "SEEN"}, None, 10).result
    finally:
        box.close()


@pytest.mark.parametrize("tier", tiers.TIERS)
def test_a_kept_font_list_is_read_by_the_next_warm_parent_and_changes_nothing_a_student_sees(tier, tmp_path):
    if tier not in tiers.available():
        pytest.skip(f"tier {tier} does not work on this machine")
    cache = tmp_path / "fontlists" / f"{tier}.json"
    first = started(tier, cache)
    try:
        assert first.info["fontlist"] == "built"
        built = fonts_seen(first)
    finally:
        first.close()
    record = json.loads(cache.read_text())
    assert record["name"].startswith("fontlist-v") and json.loads(record["content"])["ttflist"]

    second = started(tier, cache)
    try:
        assert second.info["fontlist"] == "seeded"  # read, not built: no fontconfig scan, no font opened
        assert fonts_seen(second) == built  # the same fonts, the same pixels, the same font found
    finally:
        second.close()


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """A font list kept by a first warm parent of the strongest tier here: (tier, its record)."""
    tier = tiers.available()[0]
    cache = tmp_path_factory.mktemp("kept") / f"{tier}.json"
    started(tier, cache).close()
    return tier, json.loads(cache.read_text())


@pytest.mark.parametrize("change", ["stale", "path", "shape", "garbage"])
def test_a_font_list_that_is_stale_or_not_one_is_not_used(change, kept, tmp_path):
    tier, record = kept[0], dict(kept[1])
    cache = tmp_path / "fontlists" / f"{tier}.json"
    cache.parent.mkdir()
    if change == "stale":  # the fonts changed since (the key is over the font folders and matplotlib's files)
        record["key"] = "0" * 64
    elif change == "path":
        record["name"] = "../../etc/fontlist-v1.json"
    elif change == "shape":
        record["content"] = json.dumps({"_version": 1, "ttflist": "not a list"})
    cache.write_text("{not json" if change == "garbage" else json.dumps(record))
    again = started(tier, cache)
    try:
        assert again.info["fontlist"] == "built"
    finally:
        again.close()
    assert json.loads(cache.read_text())["key"] == again.fontlists.key()  # kept anew
