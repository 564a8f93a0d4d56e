"""The attribute sites of the reverse scalar compiler's code (:mod:`._specialise`).

A model's parameters, a named tuple state's fields and a model's methods are read at every
step, at the same places in the code: a read through ``_spec_runtime._attr`` (the class's MRO
looked up, descriptors told apart) costs several times the arithmetic it feeds.  So each
place that reads an attribute -- a *site* -- has a slot in a table of its function
(``@sites``), which ``_attr`` fills the first time it reads there what the site can then read
itself: the class whose objects hold the name in their instance dict, a named tuple class and
its field's position, or, where the attribute is called, a method of the object's own class
and its specialised version.  The site checks, at each read, that the object is of that class
and (for a field or a method) that the class still holds what it held; anything else goes to
``_attr``.  The slots hold for the run that filled them (``ReverseContext._sites``, wiped when
it ends).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the compiler calls these: no import at run time)
    from ._specialise import _Compiler


def attribute(c: _Compiler, node: ast.Attribute, origin: ast.AST) -> str:
    """``obj.name`` read: from the instance dict of an object of the class in the site's slot,
    or the item of a named tuple of the class there at its field's position (the field still
    the class's); through ``_attr`` otherwise, or where that is no differentiated value of this
    run (a plain value's metadata may be kept aside)."""
    ctx = c.ctx
    obj = c.hold(c.expr(node.value, origin), origin)
    site, known, out, name = c.sites, c.fresh("m"), c.fresh(), repr(node.attr)
    c.sites += 1
    c.emit(f"{known} = {c.helper('sites')}[{site}]", origin)
    c.emit(f"if type({obj}) is {known}:", origin)
    c.emit(f"    {out} = {obj}.__dict__.get({name})", origin)
    c.emit(f"elif type({known}) is tuple and type({obj}) is {known}[0] and "
           f"{known}[1].get({name}) is {known}[2]:", origin)
    c.emit(f"    {out} = {obj}[{known}[3]]", origin)
    c.emit("else:", origin)
    c.emit(f"    {out} = None", origin)
    c.emit(f"if type({out}) is not {c.helper('T')} or {out}.owner is not "
           f"{c.hidden}ref:", origin)
    c.emit(f"    {out} = {c.helper('attr')}({ctx}, {obj}, {name}, "
           f"{c.helper('sites')}, {site})", origin)
    return out


def called_attribute(c: _Compiler, node: ast.Attribute, origin: ast.AST
                     ) -> tuple[str, tuple[str, str]]:
    """``obj.name`` about to be called, looked up where Python looks it up (before the
    arguments): ``_METHOD`` where it is the method in the site's slot (``(class, its dict, the
    function, its specialised version)``: the method still the class's, not shadowed by the
    instance's dict), whose version the call then calls itself with the object; else the
    attribute, as ``_attr`` reads it.  Returns the name holding either, and the names of the
    slot and the object (see ``_Compiler.call``)."""
    ctx, sites, site = c.ctx, c.helper("sites"), c.sites
    c.sites += 1
    obj = c.fresh()  # (into a temporary: the arguments' code could rebind a name)
    c.emit(f"{obj} = {c.expr(node.value, origin)}", origin)
    known, out, name = c.fresh("m"), c.fresh(), repr(node.attr)
    c.emit(f"{known} = {sites}[{site}]", origin)
    c.emit(f"if {known} is not None and type({obj}) is {known}[0] and "
           f"{known}[1].get({name}) is {known}[2] and {name} not in {obj}.__dict__:",
           origin)
    c.emit(f"    {out} = {c.helper('METHOD')}", origin)
    c.emit("else:", origin)
    c.emit(f"    {out} = {c.helper('attr')}({ctx}, {obj}, {name}, {sites}, {site}, "
           f"True)", origin)
    return out, (known, obj)
