"""The reports' networks, end to end: ``gpuopt.models``.

* :class:`MnistCNN` -- the ECE408 Fall 2016 MNIST CNN (trained model: ``MnistCNN.from_file()``);
* :class:`FashionCNN` -- the ECE408 Spring 2018 Fashion-MNIST network (its trained weights are not public:
  ``FashionCNN.random(seed)``, or ``FashionCNN.from_file(npz)``);
* :data:`STAGES` / :func:`stages` -- each network's stages, the reports' implementations of the whole
  forward (``variant=`` of ``forward`` / ``predict`` / ``evaluate``; the CLI's ``--variant``):

  ======== ===========================================================================
  mnist    serial (Table 2), basic (Table 3), optimized (Table 4), hybrid (Table 5), fast
  fashion  serial (Milestone 2), basic (Milestone 3), optimized (Optimization 8/9), fast
  ======== ===========================================================================

* ``python -m gpuopt.models {mnist,fashion,stages}`` -- run a stage on the real MNIST test set (or seeded
  synthetic Fashion images) and print its accuracy and per-layer times.

>>> import numpy as np
>>> from gpuopt.models import MnistCNN
>>> net = MnistCNN.random(seed=0)        # seeded, untrained weights of the reference shapes
>>> images = np.zeros((3, 28, 28), np.uint8)
>>> net.forward(images, variant="serial").shape
(3, 10)
>>> net.predict(images, variant="serial").dtype
dtype('int64')

Modules: :mod:`.stages` (the stage table), :mod:`.network` (input checks, chunking, running a stage,
timing), :mod:`.mnist`, :mod:`.fashion`, :mod:`.__main__` (the command line).
"""

from __future__ import annotations

from .fashion import FASHION_KEYS, FashionCNN, synthetic_images
from .mnist import REFERENCE_ACCURACY, MnistCNN
from .network import DEFAULT_MEMORY_BUDGET, LayerSpec, Network
from .timing import ForwardTiming, LayerTime
from .stages import STAGES, Stage, Step, cpu_stages, get_stage, missing, stages

__all__ = ["MnistCNN", "FashionCNN", "Network", "STAGES", "Stage", "Step", "stages", "cpu_stages", "get_stage",
           "missing", "ForwardTiming", "LayerTime", "LayerSpec", "REFERENCE_ACCURACY", "FASHION_KEYS",
           "synthetic_images", "DEFAULT_MEMORY_BUDGET"]
