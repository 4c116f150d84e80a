"""The one version ordering (perfledger.versions): PEP 440, unparseable labels after every version."""

from perfledger.versions import earlier_versions, is_version, version_key


def test_pep440_order_with_dev_pre_and_post_releases():
    names = ["0.24.0", "1.3.0.post1", "0.1.dev19262", "1.3.0", "1.3.0rc20", "0.5.6.post2"]
    assert sorted(names, key=version_key) == ["0.1.dev19262", "0.5.6.post2", "0.24.0", "1.3.0rc20", "1.3.0", "1.3.0.post1"]


def test_unparseable_labels_sort_last_by_text_and_never_donate():
    assert sorted(["main", "9.9", "feature-x", "0.1"], key=version_key) == ["0.1", "9.9", "feature-x", "main"]
    assert not is_version("main") and is_version("0.1.dev5")
    assert earlier_versions("0.24.0", ["0.1.dev19262", "main", "0.27.0", "0.19.0"]) == ["0.19.0", "0.1.dev19262"]
