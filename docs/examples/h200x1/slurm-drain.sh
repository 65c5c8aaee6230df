#!/bin/sh
# gridready: drain quarantined nodes (review before running)
