/* model -- being written */
