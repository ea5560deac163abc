"""MetricChart: one metric over steps for one or several runs (textual-plotext)."""

from __future__ import annotations

from typing import Mapping, Sequence

from textual_plotext import PlotextPlot


class MetricChart(PlotextPlot):
    DEFAULT_CSS = """
    MetricChart { height: 1fr; min-height: 8; }
    """

    def plot_series(self, title: str, series: Mapping[str, Sequence[Mapping[str, float]]]) -> None:
        """series: label -> [{step, value}], drawn as lines on one chart."""
        plt = self.plt
        self.drawn_title, self.drawn_points = title, {}  # what the chart shows now (read by tests and the app)
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        plt.xlabel("step")
        drawn = 0
        for label, points in series.items():
            pts = [(p.get("step") or i, p.get("value")) for i, p in enumerate(points) if p.get("value") is not None]
            if not pts:
                continue
            self.drawn_points[label] = len(pts)
            xs, ys = zip(*pts)
            if len(xs) == 1:
                plt.scatter(list(xs), list(ys), label=label)
            else:
                plt.plot(list(xs), list(ys), label=label, marker="braille")
            drawn += 1
        if not drawn:
            plt.title(f"{title} (no data)")
        self.refresh()
