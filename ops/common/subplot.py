"""Data-Juicer's subplot detector (image_subplot_filter): straight lines found by the probabilistic
Hough transform on Canny edges, sorted into horizontal and vertical ones, and a confidence in [0, 1]
that they form a grid of panels.

Per image: greyscale, 5x5 Gaussian blur, Canny(canny_threshold1, canny_threshold2), HoughLinesP
(1 px, 1 degree, hough_threshold, min_line_length, max_line_gap). A segment within angle_tolerance
degrees of 0 or 180 is horizontal, else within it of +-90 vertical (a vertical segment, dx = 0,
counts as 90). The confidence, when there is at least one of each, is

    0.2 h_score + 0.2 v_score + 0.15 h_regularity + 0.15 v_regularity + 0.2 grid
    + 0.05 h_length + 0.05 v_length, capped at 1

  h_score, v_score   lines found / min_{horizontal,vertical}_lines, capped at 1
  regularity         1 - CV of the gaps between consecutive line positions (mid y of horizontal,
                     mid x of vertical lines), floored at 0; halved when the mean gap is under 5%
                     of the image height (horizontal) or width (vertical); 0 below two lines
  grid               min(1, h_lines * v_lines / (width * height) * 1000)
  length             1 - CV of the lines' extents along their axis, floored at 0; halved when the
                     mean is under 30% of the image width (horizontal) or height (vertical); 0 below
                     two lines
(CV: population standard deviation / mean; a zero mean gives 0.)
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SubplotParams:
    min_horizontal_lines: int
    min_vertical_lines: int
    canny_threshold1: int
    canny_threshold2: int
    hough_threshold: int
    min_line_length: int
    max_line_gap: int
    angle_tolerance: float


def detect_subplot(image, p: SubplotParams) -> tuple[float, int, int]:
    """(confidence, horizontal line count, vertical line count) for a PIL RGB image."""
    import numpy as np

    from djx.ops.common.vision import opencv
    cv2 = opencv()
    grey = cv2.cvtColor(np.asarray(image), cv2.COLOR_RGB2GRAY)
    edges = cv2.Canny(cv2.GaussianBlur(grey, (5, 5), 0), p.canny_threshold1, p.canny_threshold2)
    found = cv2.HoughLinesP(edges, 1, np.pi / 180, p.hough_threshold,
                            minLineLength=p.min_line_length, maxLineGap=p.max_line_gap)
    if found is None:
        return 0.0, 0, 0
    horizontal, vertical = _split_by_angle(found.reshape(-1, 4), p.angle_tolerance)
    width, height = image.width, image.height
    return _confidence(horizontal, vertical, width, height, p), len(horizontal), len(vertical)


def _split_by_angle(segments, tolerance: float):
    """(horizontal, vertical) segments, each an (n, 4) array of x1, y1, x2, y2."""
    import numpy as np
    dx = segments[:, 2] - segments[:, 0]
    dy = segments[:, 3] - segments[:, 1]
    angle = np.where(dx == 0, 90.0, np.degrees(np.arctan2(dy, dx)))
    is_h = (np.abs(angle) <= tolerance) | (np.abs(angle - 180) <= tolerance)
    is_v = ~is_h & ((np.abs(angle - 90) <= tolerance) | (np.abs(angle + 90) <= tolerance))
    return segments[is_h], segments[is_v]


def _confidence(horizontal, vertical, width: int, height: int, p: SubplotParams) -> float:
    if not len(horizontal) or not len(vertical) or width == 0 or height == 0:
        return 0.0
    h_y = (horizontal[:, 1] + horizontal[:, 3]) / 2
    v_x = (vertical[:, 0] + vertical[:, 2]) / 2
    grid = 0.0
    if len(horizontal) >= 2 and len(vertical) >= 2:
        grid = min(len(horizontal) * len(vertical) / (width * height) * 10000 / 10.0, 1.0)
    terms = (min(len(horizontal) / p.min_horizontal_lines, 1.0) * 0.2,
             min(len(vertical) / p.min_vertical_lines, 1.0) * 0.2,
             _spread_score(_gaps(h_y), 0.05 * height) * 0.15,
             _spread_score(_gaps(v_x), 0.05 * width) * 0.15,
             grid * 0.2,
             _spread_score(_extents(horizontal, 0), 0.3 * width) * 0.05,
             _spread_score(_extents(vertical, 1), 0.3 * height) * 0.05)
    total = terms[0]
    for term in terms[1:]:  # left to right, as Data-Juicer sums them
        total = total + term
    return float(min(total, 1.0))


def _gaps(positions):
    """Gaps between consecutive sorted positions; None below two lines."""
    import numpy as np
    return np.diff(np.sort(positions)) if len(positions) >= 2 else None


def _extents(segments, axis: int):
    """|x2 - x1| (axis 0) or |y2 - y1| (axis 1) per segment; None below two lines."""
    import numpy as np
    if len(segments) < 2:
        return None
    return np.abs(segments[:, 2 + axis] - segments[:, axis])


def _spread_score(values, min_mean: float) -> float:
    """1 - CV of `values`, floored at 0, halved when their mean is under `min_mean`."""
    import numpy as np
    if values is None or len(values) < 1:
        return 0.0
    mean = np.mean(values)
    if mean == 0:
        return 0.0
    score = max(0, 1 - np.std(values) / mean)
    return score * 0.5 if mean < min_mean else score
