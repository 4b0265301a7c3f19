"""Rehearsals: synthetic fans driven through the real, running room over loopback.

``scenarios`` names what is rehearsed, ``fans`` drives it (fans, the shop behind the room,
staff's live controls), ``figures`` judges it (pure), ``report_html`` draws it and ``run``
(``make rehearse``) starts the room and puts it all together.
"""
