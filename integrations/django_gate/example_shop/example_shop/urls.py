from django.urls import path

from example_shop import views

urlpatterns = [
    path("products/<int:product_id>", views.product),
    path("cart", views.cart),
    path("static/<path:name>", views.static_file),
    path("healthz", views.healthz),
    path("healthz/gate", views.gate_stats),
    path("webhooks/payment", views.payment_webhook),
]
