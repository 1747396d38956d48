"""costmodels"""
