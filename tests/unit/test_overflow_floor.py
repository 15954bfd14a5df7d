"""Spec 000's cap on new bullets: a lesson past the cap reinforces its nearest bullet
only when that bullet is similar enough; an unrelated one gains nothing."""

from __future__ import annotations

from memorist.roles.learning import (
    OVERFLOW_FLOOR,
    Bullet,
    CurationInput,
    Delta,
    Lesson,
    NewBullet,
    Reflection,
    Similar,
    cap_new,
)


def _input(nearest: float) -> CurationInput:
    lessons = tuple(Lesson(content=f"Lesson number {i}", type="strategy") for i in range(3))
    near = Similar(Bullet(id="b-1", content="Use a number line for negative numbers"), nearest)
    return CurationInput(reflection=Reflection(lessons=lessons), candidates=((), (), (near,)), max_new=2)


def _delta() -> Delta:
    return Delta(new=tuple(NewBullet(content=f"Lesson number {i}", lesson=i) for i in range(3)))


def test_an_unrelated_nearest_bullet_is_not_reinforced() -> None:
    capped = cap_new(_delta(), _input(0.0))
    assert [b.content for b in capped.new] == ["Lesson number 0", "Lesson number 1"]
    assert capped.updates == ()
    assert cap_new(_delta(), _input(OVERFLOW_FLOOR - 0.01)).updates == ()


def test_a_similar_nearest_bullet_is_reinforced() -> None:
    capped = cap_new(_delta(), _input(0.92))
    assert [(u.id, u.helpful) for u in capped.updates] == [("b-1", 1)]
