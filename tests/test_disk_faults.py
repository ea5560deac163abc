"""A save that the disk refuses (here: a file size limit, as a full disk refuses) ends in
one OSError line naming the file and the fix, never torch's long RuntimeError."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_refused_checkpoint_write_is_one_line_naming_the_file(tmp_path):
    script = textwrap.dedent(f"""
        import resource, sys
        from lactchain.models.critic import Critic
        critic = Critic.load("tiny")
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # from here on no file grows past 4 KB
        try:
            critic.save({str(tmp_path / "critic")!r})
        except OSError as exc:
            print("OSError:", exc)
            sys.exit(3)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 3, out.stdout + out.stderr
    line = out.stdout.strip()
    assert "could not write the critic checkpoint" in line and "a full disk or a file size limit" in line
    assert "lactchain runs resume" in line and len(line.splitlines()) == 1
