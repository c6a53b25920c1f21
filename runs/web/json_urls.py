"""URLs of the notebook service's HTTP endpoints; runs/urls.py includes them in the "runs" namespace."""

from django.urls import path

from runs.web import annotations, corrections, fork, images, page_json

urlpatterns = [
    path("tasks/new", page_json.new_task, name="task_new"),
    path("api/tasks/", page_json.task_list, name="api_tasks"),
    path("api/tasks/<int:pk>/trace.json", page_json.task_trace, name="api_task_trace"),
    path(
        "api/tasks/<int:pk>/result.csv",
        page_json.task_result_csv,
        name="api_task_result_csv",
    ),
    path(
        "api/tasks/<int:pk>/tool-part",
        page_json.task_tool_part,
        name="api_task_tool_part",
    ),
    path("api/presets/", page_json.preset_list, name="api_presets"),
    path("api/images/", images.upload_image, name="api_images"),
    path("images/<int:pk>/", images.image, name="image"),
    path("demo/sample-chart.png", images.sample_chart, name="sample_chart"),
    path("api/tasks/compare/", fork.compare_json, name="api_compare"),
    path("api/tasks/<int:pk>/fork/", fork.fork_task, name="api_task_fork"),
    path(
        "api/tasks/<int:pk>/annotations/",
        annotations.task_annotations,
        name="api_task_annotations",
    ),
    path(
        "api/tasks/<int:pk>/corrections/",
        corrections.task_corrections,
        name="api_task_corrections",
    ),
    path(
        "api/tasks/<int:pk>/corrected-answers/",
        corrections.task_corrected_answer,
        name="api_task_corrected_answer",
    ),
]
