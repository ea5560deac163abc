"""Step-by-step replay of a path on a screen: the step `t`, autoplay on a pausable
timer, and the keys (`step`, `jump`, `play`). Shared by the Archive screen and the
decision transformer's instruction modal, which differ only in what they replay."""

from __future__ import annotations


class StepReplay:
    """Mix into a Screen. The screen says how far the replay goes (`replay_last`: the
    last step, None when there is nothing to replay) and draws step `t` (`show_step`);
    it calls `start_replay_timer(seconds)` once mounted."""

    t: int = 0
    playing: bool = False

    def replay_last(self) -> int | None:
        raise NotImplementedError

    def show_step(self) -> None:
        raise NotImplementedError

    def before_replay_key(self) -> None:
        """Hook run before every replay key (the Archive screen follows its table's cursor)."""

    def start_replay_timer(self, seconds: float) -> None:
        self._timer = self.set_interval(seconds, self._replay_tick, pause=True)  # type: ignore[attr-defined]

    def start_playing(self) -> None:
        self.playing = True
        self._timer.reset()
        self._timer.resume()

    def _replay_tick(self) -> None:
        last = self.replay_last()
        if last is not None and self.t < last:
            self.t += 1
        if last is None or self.t >= last:
            self._stop()
        self.show_step()

    def _stop(self) -> None:
        self.playing = False
        timer = getattr(self, "_timer", None)
        if timer is not None:
            timer.pause()

    def action_step(self, delta: int) -> None:
        self.before_replay_key()
        last = self.replay_last()
        if last is None:
            return
        self._stop()
        self.t = min(last, max(0, self.t + int(delta)))
        self.show_step()

    def action_jump(self, where: str) -> None:
        self.before_replay_key()
        last = self.replay_last()
        if last is None:
            return
        self._stop()
        self.t = 0 if where == "start" else last
        self.show_step()

    def action_play(self) -> None:
        self.before_replay_key()
        last = self.replay_last()
        if last is None:
            return
        if self.playing:
            self._stop()
        else:
            if self.t >= last:
                self.t = 0
            self.start_playing()
        self.show_step()
