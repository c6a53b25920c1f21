"""Page URLs of the notebook UI; included by runs/urls.py, so names live in the "runs" namespace."""

from django.urls import path

from runs.web import (
    budgets,
    compose,
    data,
    datasets,
    deleting,
    event_values,
    fork,
    inbox,
    pages,
    policies,
    tokens,
    webhooks,
)

urlpatterns = [
    path("new/", pages.new_notebook, name="notebook_new"),
    path("presets/save", compose.save_preset, name="preset_save"),
    path("presets/<int:pk>/delete", compose.delete_preset, name="preset_delete"),
    path("tasks/<int:pk>/", pages.notebook, name="notebook"),
    path("tasks/<int:pk>/delete", deleting.delete, name="notebook_delete"),
    path(
        "tasks/<int:pk>/deadline",
        inbox.notebook_deadline,
        name="notebook_deadline",
    ),
    path(
        "tasks/<int:pk>/budget",
        budgets.notebook_budget,
        name="notebook_budget",
    ),
    path("inbox/", inbox.inbox, name="inbox"),
    path(
        "tasks/<int:pk>/events/<int:seq>/value",
        event_values.event_value_view,
        name="event_value",
    ),
    path("traces/", pages.trace_list, name="traces"),
    path("traces/compare/", fork.compare, name="compare"),
    path("traces/<int:pk>/", pages.trace, name="trace"),
    path("review/datasets/", datasets.datasets_page, name="datasets"),
    path("review/datasets/<int:pk>/", datasets.dataset_page, name="dataset"),
    path(
        "review/datasets/<int:pk>/import",
        datasets.dataset_import,
        name="dataset_import",
    ),
    path(
        "review/datasets/<int:pk>/examples/<str:key>/answer",
        datasets.dataset_answer,
        name="dataset_answer",
    ),
    path(
        "review/datasets/<int:pk>/examples/<str:key>/remove",
        datasets.dataset_remove,
        name="dataset_remove",
    ),
    path("data/", data.data_page, name="data"),
    path("data/example.csv", data.data_example, name="data_example"),
    path("policies/", policies.policies_page, name="policies"),
    path("policies/<int:pk>/revoke", policies.revoke, name="policy_revoke"),
    path("settings/tokens/", tokens.api_tokens, name="api_tokens"),
    path(
        "settings/tokens/<int:pk>/revoke",
        tokens.revoke,
        name="api_token_revoke",
    ),
    path("settings/webhooks/", webhooks.webhooks, name="webhooks"),
    path(
        "settings/webhooks/<int:pk>/delete",
        webhooks.delete,
        name="webhook_delete",
    ),
]
