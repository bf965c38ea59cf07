"""Built-in ops; importing this package registers them."""
from .filter import (image_aspect_ratio_filter, image_shape_filter, image_size_filter,  # noqa: F401
                     text_length_filter)
