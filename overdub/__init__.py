"""overdub: run ordinary Python inside a context that sees every call and operator it makes.

A Python take on Julia's Cassette.jl.  See ``docs/concepts.md`` for the mental model.
"""

from ._active import current_context
from ._context import (Context, can_recurse, is_opaque, keeps_heap_metadata, opaque, overdub,
                       recurse, show_rewrite, tags_values)
from ._frames import hide_machinery
from ._primitives import unbind
from ._rewrite import embed
from ._source import why_no_source
from ._tagging import Tagged, TagError, carries_tags, has_metadata, metadata, tag, untag
from ._variants import (NoSourceError, compile_variant, function_source, hidden_prefix,
                        variant_function, variant_maker)

__all__ = ["Context", "overdub", "recurse", "can_recurse", "opaque", "is_opaque", "embed",
           "current_context", "show_rewrite", "unbind", "why_no_source",
           "tag", "untag", "metadata", "has_metadata", "Tagged", "TagError", "carries_tags",
           "keeps_heap_metadata", "tags_values", "hide_machinery",
           "function_source", "hidden_prefix", "compile_variant", "variant_function",
           "variant_maker", "NoSourceError"]


def _public_module() -> None:
    """Give the public functions and classes the module users import them from: a trace,
    ``help`` and a repr say ``overdub.overdub``, not ``overdub._context.overdub`` (pickle
    finds them there too)."""
    import types
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, (types.FunctionType, type)) and obj.__module__.startswith("overdub."):
            obj.__module__ = __name__


_public_module()
