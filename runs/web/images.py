"""HTTP endpoints for images: upload one for a message, show an attached one, the demo chart."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runs.models import Attachment
from runs.protocol import ProtocolError
from runs.service import (
    ImageRefused,
    describe_image,
    discard_upload,
    max_image_bytes,
    size_text,
    store_upload,
)
from runs.service.surfaces import sample_chart_png


@require_POST
def upload_image(request: HttpRequest) -> JsonResponse:
    """`POST /api/images/` (multipart field `image`): 201 with the stored image, or 400 and why."""
    upload = request.FILES.get("image")
    if upload is None:
        return JsonResponse({"error": "Choose an image file to attach."}, status=400)
    name = upload.name or "image"
    if (
        upload.size is not None and upload.size > max_image_bytes()
    ):  # refuse before reading it all
        return JsonResponse(
            {
                "error": f"{name} is {size_text(upload.size)}; images may be at most {size_text(max_image_bytes())}."
            },
            status=400,
        )
    try:
        attachment = store_upload(request.user, name, upload.read())  # type: ignore[arg-type]
    except ImageRefused as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    except ProtocolError as exc:  # quota_exceeded: too many unsent images
        return JsonResponse({"error": exc.reason, "code": exc.code.value}, status=409)
    return JsonResponse(describe_image(attachment), status=201)


@require_http_methods(["GET", "DELETE"])
def image(request: HttpRequest, pk: int) -> HttpResponse:
    """`GET /images/<id>/`: an image its owner uploaded. `DELETE`: discard an unsent upload
    (removed from the composer), 204; 404 for a sent image or someone else's."""
    if request.method == "DELETE":
        if not discard_upload(request.user.pk, pk):  # type: ignore[arg-type]
            return JsonResponse({"error": "No such unsent image."}, status=404)
        return HttpResponse(status=204)
    attachment = get_object_or_404(Attachment, pk=pk, owner_id=request.user.pk)
    response = HttpResponse(bytes(attachment.data), content_type=attachment.mime)
    response["Cache-Control"] = "private, max-age=86400"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
def sample_chart(request: HttpRequest) -> HttpResponse:
    """`GET /demo/sample-chart.png`: the chart the Vision ReAct example attaches (drawn from the data)."""
    return HttpResponse(sample_chart_png(), content_type="image/png")
