"""Trajectories on the flat scene: behaviour descriptors on hand-built paths, annotations
only where the relation changes, replay verification that catches a corrupted row."""

from __future__ import annotations

import json

import pytest

from lactchain.envs.scenes import get_scene
from lactchain.archive.trajectories import Trajectory, annotate, behaviour_descriptor, play, verify

F, L, R = "move forward", "turn left", "turn right"
FLAT = {"scene": "flat", "moves": (F, L, R)}


@pytest.fixture(scope="module")
def flat():
    return get_scene("flat")


def test_the_bd_is_the_final_cell_and_the_landmarks_entered_in_order(flat):
    # (1,3) -> across the sofa (2..4, 3) -> (5,3) -> up into the bed (5,5), then back to the sofa
    path = [(1, 3), (2, 3), (3, 3), (4, 3), (5, 3), (5, 4), (5, 5), (5, 4), (4, 4), (4, 3)]
    bd = behaviour_descriptor(flat, path)
    assert bd.visited == ("sofa", "bed", "sofa") and bd.final == (4, 3)
    assert bd.key == "4,3|sofa>bed>sofa"
    assert behaviour_descriptor(flat, [(1, 1), (1, 2)]).visited == ()  # no landmark touched
    assert behaviour_descriptor(flat, [(2, 3), (2, 3), (3, 3)]).visited == ("sofa",)  # staying counts once
    with pytest.raises(ValueError, match="at least its start pose"):
        behaviour_descriptor(flat, [])


def test_annotations_come_only_where_the_relation_changes(flat):
    path = [{"x": 1, "y": 1, "orientation": "east"}, {"x": 1, "y": 1, "orientation": "north"},  # a turn: no change
            {"x": 1, "y": 2, "orientation": "north"}, {"x": 2, "y": 2, "orientation": "east"},
            {"x": 2, "y": 3, "orientation": "north"}]
    notes = annotate(flat, path)
    assert [n["t"] for n in notes] == [0, 3, 4]
    assert [n["text"] for n in notes] == ["south-west of the sofa", "south of the sofa", "at the sofa"]
    assert annotate(get_scene("empty"), path) == []  # no landmarks, nothing to say


def test_a_played_trajectory_verifies_and_round_trips_through_json():
    t = play([[F, F, L, F, F, F], [F, F, F]], {"x": 0, "y": 0, "orientation": "east"}, env_kwargs=FLAT,
             policy={"kind": "hand"})
    assert t.bd == {"final": [2, 6], "visited": ["sofa"]}
    assert t.env_kwargs["scene"]["name"] == "flat" and t.env_kwargs["scene"]["landmarks"]  # the scene itself
    assert len(t.path) == 1 + sum(len(a) for a in t.actions) and t.rewards == [-6.0, -3.0]
    assert verify(t) is None
    again = Trajectory.from_dict(json.loads(json.dumps(t.as_dict())))
    assert again == t and verify(again) is None


def test_verify_names_the_first_diverging_step_of_a_corrupted_row():
    t = play([[F, F], [L, F], [F, F]], {"x": 0, "y": 0, "orientation": "east"}, env_kwargs=FLAT)
    corrupted = Trajectory.from_dict(t.as_dict())
    corrupted.actions[1] = [R, F]  # one flipped turn in the stored row
    mismatch = verify(corrupted)
    assert mismatch is not None and mismatch.step == 1 and "stored" in str(mismatch)
    tampered = Trajectory.from_dict(t.as_dict())
    tampered.bd = {"final": [9, 9], "visited": []}
    assert "behaviour descriptor" in str(verify(tampered))
    broken = Trajectory.from_dict({**t.as_dict(), "env_kwargs": {**t.env_kwargs, "scene": "attic"}})
    assert "cannot replay" in str(verify(broken)) and "attic" in str(verify(broken))


def test_moves_after_the_goal_are_not_stored_and_older_rows_still_verify():
    # Default 4x4: from (3, 1) facing north, two steps reach the goal (3, 3); the rest is never executed.
    t = play([["move forward", "move forward", "turn left", "move forward"]], {"x": 3, "y": 1, "orientation": "north"})
    assert t.actions == [["move forward", "move forward"]] and t.rewards[0] > 0
    assert len(t.path) == 1 + sum(len(a) for a in t.actions)
    older = Trajectory.from_dict({**t.as_dict(), "actions": [["move forward", "move forward", "turn left"]]})
    assert verify(older) is None  # a file written before this kept the unexecuted tail
