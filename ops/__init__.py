"""Built-in ops; importing this package registers them (and the model loaders they use)."""
import djx.ops.filter.image_aspect_ratio_filter  # noqa: F401
import djx.ops.filter.image_shape_filter  # noqa: F401
import djx.ops.filter.image_size_filter  # noqa: F401
import djx.ops.filter.image_text_matching_filter  # noqa: F401
import djx.ops.filter.image_text_similarity_filter  # noqa: F401
import djx.ops.filter.text_length_filter  # noqa: F401
import djx.ops.models  # noqa: F401
import djx.ops.filter.alphanumeric_filter  # noqa: F401
import djx.ops.filter.character_repetition_filter  # noqa: F401
import djx.ops.filter.flagged_words_filter  # noqa: F401
import djx.ops.filter.special_characters_filter  # noqa: F401
import djx.ops.filter.stopwords_filter  # noqa: F401
import djx.ops.filter.token_num_filter  # noqa: F401
import djx.ops.filter.word_repetition_filter  # noqa: F401
import djx.ops.filter.words_num_filter  # noqa: F401
