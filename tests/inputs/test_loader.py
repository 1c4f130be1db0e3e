"""The bounded loader (``inputspec.files``, ``inputspec.parse``): issue #30 item 2's cases."""

import os

import pytest

from inputspec import InputError, read_bytes, read_data, read_text
from inputspec.errors import MAX_MESSAGE_CHARS, show

#: Nine lines expanding to 9^9 strings: the issue's alias bomb.
BOMB = "\n".join(["l0: &l0 [" + ", ".join(['"lol"'] * 9) + "]"] + [
    f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]) + "\n"


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def test_yaml_alias_bomb_is_refused_before_expansion(tmp_path):
    p = _write(tmp_path, "job.yaml", BOMB + "dp: *l8\n")
    with pytest.raises(InputError, match=r"job file .*job.yaml: YAML aliases"):
        read_data(p, "job")


def test_even_a_small_alias_is_refused(tmp_path):
    p = _write(tmp_path, "f.yaml", "a: &x 1\nb: *x\n")
    with pytest.raises(InputError, match=r"aliases .* anchored on line 1"):
        read_data(p)


@pytest.mark.parametrize("name, text", [
    ("job.yaml", "tp: 1\ndp: 8\ndp: 4\n"),
    ("job.json", '{"tp": 1, "dp": 8, "dp": 4}'),
    ("nested.yaml", "overlap:\n  dp: true\n  dp: false\n"),
])
def test_duplicate_keys_are_refused_naming_the_key(tmp_path, name, text):
    with pytest.raises(InputError, match=r"duplicate key 'dp'"):
        read_data(_write(tmp_path, name, text))


def test_a_byte_order_mark_is_dropped(tmp_path):
    p = _write(tmp_path, "c.csv", "\ufeffname,gpus\nj0,8\n".encode())
    assert read_text(p).splitlines()[0] == "name,gpus"
    assert read_data(_write(tmp_path, "a.yaml", "\ufeffa: 1\n")) == {"a": 1}


@pytest.mark.parametrize("path, kind", [("/dev/zero", "character device"),
                                        ("/dev/full", "character device")])
def test_devices_are_refused_without_reading(path, kind):
    if not os.path.exists(path):
        pytest.skip(f"{path} absent here")
    with pytest.raises(InputError, match=f"{path}: is not a regular file \\(a {kind}\\)"):
        read_data(path)


def test_a_link_to_a_device_is_refused(tmp_path):
    link = tmp_path / "results.jsonl"
    link.symlink_to("/dev/full")
    with pytest.raises(InputError, match="results.jsonl: is not a regular file"):
        read_text(link, "results")


def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)  # nobody writes: an open() for reading would block forever
    with pytest.raises(InputError, match=r"a named pipe"):
        read_data(fifo)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"is not a regular file \(a directory\)"):
        read_bytes(tmp_path)


def test_the_size_cap_comes_before_reading(tmp_path):
    p = tmp_path / "big.json"
    with open(p, "wb") as fh:  # sparse: 1 GiB claimed, nothing stored
        fh.truncate(2**30)
    with pytest.raises(InputError, match=r"is 1,073,741,824 bytes, more than"):
        read_bytes(p, max_bytes=2**20)


def test_an_unreadable_file_names_its_path(tmp_path):
    p = _write(tmp_path, "secret.yaml", "a: 1\n")
    p.chmod(0)
    if os.access(p, os.R_OK):
        pytest.skip("running as root: permissions do not bind")
    with pytest.raises(InputError, match=r"secret.yaml: cannot be read: permission denied"):
        read_data(p)


def test_messages_are_cut_to_a_readable_length(tmp_path):
    deep = tmp_path / ("x" * 200) / ("y" * 200)
    deep.mkdir(parents=True)
    p = _write(deep, "z.json", "[" * 10 + "1" + "]" * 9)
    with pytest.raises(InputError) as err:
        read_data(p)
    assert len(str(err.value)) <= MAX_MESSAGE_CHARS and str(err.value).endswith("...")


class _NeverShown:
    def __repr__(self):
        raise AssertionError("an item past the first few was rendered")


def test_showing_a_huge_value_renders_only_its_first_items():
    huge = [1, 2, 3, 4] + [_NeverShown()] * 10**6  # an expanded bomb: the same object 10^6 times
    text = show(huge)
    assert len(text) <= 48 and text.startswith("[1, 2, 3, 4")


def test_a_huge_yaml_text_is_refused_before_parsing():
    from inputspec import parse_text
    from inputspec.parse import MAX_YAML_CHARS

    text = "a: [" + "1, " * (MAX_YAML_CHARS // 3) + "1]\n"
    with pytest.raises(InputError, match=r"characters of YAML, more than .* write large data "
                                         r"as JSON"):
        parse_text(text, "yaml", "big.yaml")
