"""The self-contained HTML report: the jinja2 environment and ``render_html``.

``render_html(result)`` takes the JSON-contract dictionary (what ``ncu-advise analyze --format
json`` prints), builds the view-model (:func:`ncu_advisor.render.html_view.build_page`) and
renders it with jinja2 templates that only loop and format (filters:
:mod:`ncu_advisor.render.formats`). Everything from the input is escaped by autoescaping; the
roofline SVG from :mod:`ncu_advisor.render.charts` is the only markup marked safe, and it escapes
its own labels. The page loads nothing: CSS and JS are inlined, there are no fonts or CDNs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from .formats import FILTERS, NOT_MEASURED
from .html_view import OVERVIEW_FIELDS, build_page, sections

if TYPE_CHECKING:
    from ..analysis.result import Analysis


@lru_cache(maxsize=1)
def environment() -> Environment:
    """Return the jinja2 environment of the report templates, with the format filters.

    One per process: jinja2 keeps the templates it compiled in it, and compiling the report's
    templates is most of a first page's rendering time (about 0.15 s).
    """
    env = Environment(loader=PackageLoader("ncu_advisor", "render/templates"),
                      autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(FILTERS)
    env.globals["not_measured"] = NOT_MEASURED
    return env


def render_html(result: Mapping[str, Any], group_by: str | None = None) -> str:
    """Render the self-contained HTML report of one analysis result.

    Args:
        result: the JSON-contract dictionary (what ``ncu-advise analyze --format json`` prints).
        group_by: group the findings list by ``kernel``, ``nvtx`` or ``origin`` (default:
            one list ranked by saving).

    Returns:
        The HTML page as a string; it loads nothing from the network.

    """
    page = build_page(result, group_by)
    return environment().get_template("report.html.j2").render(page=page)


def page_document(analysis: Analysis, include_metrics: bool = False,
                  launches: Collection[int] | None = None) -> dict:
    """The JSON-contract dictionary the page reads, whole only where the page reads it whole.

    The page of a big run gives a section to a few kernels and reads a few fields of the
    others (:data:`~.html_view.OVERVIEW_FIELDS`): those kernels' entries are whole, the
    others hold those fields. The page is the one :meth:`Analysis.to_dict` would give.
    ``launches``: the launches the page will show (``--kernel``, ``--nvtx``; None: all).
    """
    document = analysis.to_dict(include_metrics, kernel_fields=OVERVIEW_FIELDS)
    kernels = document["kernels"]
    if launches is not None:
        kept = set(launches)
        kernels = [k for k in kernels if k["launch"] in kept]
    shown = [kernels[i]["launch"] for i in sections(kernels)]
    whole = {k["launch"]: k for k in analysis.iter_kernels(include_metrics, launches=shown)}
    document["kernels"] = [whole.get(k["launch"], k) for k in document["kernels"]]
    return document


def warm_up() -> None:
    """Compile the report page's templates now, before the first page is rendered.

    A process's first page took 0.29-0.41 s, later ones 0.17-0.19 s (forms_app, 9 launches);
    ``ncu-advise ./app`` calls this while the program runs under ncu.
    """
    env = environment()
    # The page's includes and imports are loaded when it renders, not with the page itself.
    for name in env.list_templates():  # the CSS and JS are included as templates too
        env.get_template(name)
