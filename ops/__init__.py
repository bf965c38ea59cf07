"""Built-in ops; importing this package registers them (and the model loaders they use)."""
from . import models  # noqa: F401
from .filter import (image_aspect_ratio_filter, image_shape_filter, image_size_filter,  # noqa: F401
                     image_text_matching_filter, image_text_similarity_filter, text_length_filter)
