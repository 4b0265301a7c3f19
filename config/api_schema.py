"""Shapes shared by the API's schema annotations (documentation only)."""

from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    detail = serializers.CharField()
    fields = serializers.DictField(required=False)


def errors(*statuses: int) -> dict[int, type[ErrorSerializer]]:
    return dict.fromkeys(statuses, ErrorSerializer)
